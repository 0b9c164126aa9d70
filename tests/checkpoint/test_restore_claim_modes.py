"""Restoring from a retained checkpoint in each claim mode, on incremental RocksDB state.

After a restore the first checkpoint is full (Flink's NO_CLAIM rule, here in every mode): it
references no file of the restored snapshot, so deleting that snapshot never breaks a later
restore. NO_CLAIM and LEGACY never delete the restored snapshot; CLAIM deletes it once it is
subsumed, and nothing else. The jobs run the state layer and the checkpoint layer directly
(``scripts/retention_soak.KeyedJob``); the Spark version is in tests/runtime.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from scripts.retention_soak import KeyedJob
from sparkpoint.checkpoint.audit import audit_checkpoint_directory, referenced_files
from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    PlaceholderStreamStateHandle,
    RelativeFileStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint, store_checkpoint_metadata
from sparkpoint.checkpoint.paths import comparable_path
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.store import CompletedCheckpoint
from sparkpoint.errors import UnsafeStatePathError
from sparkpoint.fs import get_filesystem
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.state.snapshot_format import read_header
from sparkpoint.state.typeinfo import Types

FULL, INCREMENTAL = SnapshotType.FULL_CHECKPOINT, SnapshotType.CHECKPOINT
KEYS = range(600)


def _updates(epoch: int) -> dict[int, int | None]:
    """Every key changes now and then; some are cleared."""
    return {
        k: None if (k + epoch) % 11 == 0 else k * 1000 + epoch for k in KEYS if (k + epoch) % 3 == 0
    }


def _job(base: str, tmp_path: Path, name: str, retained: int = 3) -> KeyedJob:
    return KeyedJob(
        f"{base}/{name}", str(tmp_path / f"local-{name}"), parallelism=2, retained=retained
    )


def _source_job(base: str, tmp_path: Path) -> tuple[KeyedJob, str, dict[int, int]]:
    """Job A: five checkpoints (3, 4, 5 retained); returns it, chk-4 and its state."""
    a = _job(base, tmp_path, "a")
    at_four: dict[int, int] = {}
    for epoch in range(1, 6):
        a.run_epoch(_updates(epoch))
        a.checkpoint()
        if epoch == 4:
            at_four = dict(a.expected)
    a.close()
    chk4 = next(c.external_pointer for c in a.store.get_all_checkpoints() if c.checkpoint_id == 4)
    return a, chk4, at_four


def _files(job_dir: str) -> set[str]:
    fs = get_filesystem(job_dir)
    return {comparable_path(i.path) for i in fs.list(job_dir, recursive=True) if not i.is_dir}


def _referenced(cp: CompletedCheckpoint) -> set[str]:
    assert cp.metadata is not None
    return referenced_files(cp.metadata)


@pytest.mark.parametrize("claim_mode", ["NO_CLAIM", "LEGACY", "CLAIM"])
def test_first_checkpoint_after_restore_is_full_and_the_snapshot_can_be_deleted(
    storage_base: str, tmp_path: Path, claim_mode: str
) -> None:
    a, chk4, at_four = _source_job(storage_base, tmp_path)
    a_files = _files(a.job_dir)
    b = _job(storage_base, tmp_path, "b")
    b.restore(chk4, claim_mode)
    assert b.read_all(KEYS) == at_four
    b.expected = dict(at_four)
    assert b.store.forces_full_snapshot
    for epoch in range(6, 9):
        b.run_epoch(_updates(epoch))
        b.checkpoint()
    assert b.snapshot_types == [FULL, INCREMENTAL, INCREMENTAL]
    assert not b.store.forces_full_snapshot
    first, second, third = b.store.get_all_checkpoints()
    b_dir = comparable_path(b.job_dir)
    for cp in (first, second, third):  # every file in B's own directory
        assert _referenced(cp) and all(p.startswith(b_dir + "/") for p in _referenced(cp))
    b.close()
    if claim_mode == "CLAIM":  # B owns chk-4; it was subsumed (3 retained: 4 went first)
        assert _files(a.job_dir) < a_files
    else:
        assert _files(a.job_dir) == a_files
    get_filesystem(a.job_dir).delete(a.job_dir, recursive=True)
    c = _job(storage_base, tmp_path, "c")
    c.restore(third.external_pointer)
    assert c.read_all(KEYS) == b.expected
    c.close()


def test_without_the_rule_deleting_the_restored_snapshot_breaks_the_next_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: were the first checkpoint incremental, it would reference A's files,
    which the path rules refuse on the next restore (and which the user deleted anyway).
    One SST per subtask and one small change keep RocksDB from compacting them away."""
    base = tmp_path.as_uri()
    a = _job(base, tmp_path, "a")
    a.run_epoch(_updates(1))
    restored = a.checkpoint()
    a.close()
    assert restored is not None
    b = _job(base, tmp_path, "b")
    b.restore(restored.external_pointer)
    monkeypatch.setattr(type(b.store), "forces_full_snapshot", property(lambda self: False))
    b.run_epoch({1: 1})
    cp = b.checkpoint()
    b.close()
    assert cp is not None and b.snapshot_types == [INCREMENTAL]
    a_dir = comparable_path(a.job_dir)
    assert any(p.startswith(a_dir + "/shared/") for p in _referenced(cp))
    get_filesystem(a.job_dir).delete(a.job_dir, recursive=True)
    c = _job(base, tmp_path, "c")
    with pytest.raises(UnsafeStatePathError, match=f"'{a.job_dir}/shared/"):
        c.restore(cp.external_pointer)


@pytest.mark.parametrize("claim_mode", ["NO_CLAIM", "LEGACY"])
def test_no_claim_never_deletes_the_restored_snapshot(tmp_path: Path, claim_mode: str) -> None:
    base = tmp_path.as_uri()
    a, chk4, _ = _source_job(base, tmp_path)
    before = _files(a.job_dir)
    b = _job(base, tmp_path, "b", retained=1)
    b.restore(chk4, claim_mode)
    for epoch in range(6, 10):
        b.run_epoch(_updates(epoch))
        b.checkpoint()
    b.store.shutdown("FINISHED", b.cleaner)
    b.close()
    assert _files(a.job_dir) == before
    assert audit_checkpoint_directory(a.job_dir).exact
    assert _files(b.job_dir) == set()  # B's own checkpoints went with the job


def test_claim_deletes_the_restored_checkpoint_once_subsumed_and_nothing_else(
    tmp_path: Path,
) -> None:
    base = tmp_path.as_uri()
    a, chk4, _ = _source_job(base, tmp_path)
    before = _files(a.job_dir)
    restored_metadata, _ = load_checkpoint(a.storage, chk4)
    owned = referenced_files(restored_metadata) | {comparable_path(f"{chk4}/_metadata")}
    b = _job(base, tmp_path, "b", retained=1)
    b.restore(chk4, "CLAIM")
    b.run_epoch(_updates(6))
    b.checkpoint()  # subsumes the restored chk-4
    assert b.cleaner.wait_until_idle(30)
    b.close()
    after = _files(a.job_dir)
    assert before - after == owned  # exactly the claimed checkpoint's files
    assert not any(p.startswith(comparable_path(chk4) + "/") for p in after)
    assert {comparable_path(p) for p in (f"{a.job_dir}/chk-3", f"{a.job_dir}/chk-5")} <= {
        comparable_path(i.path) for i in get_filesystem(a.job_dir).list(a.job_dir)
    }


def test_a_failed_full_checkpoint_leaves_the_next_one_full(tmp_path: Path) -> None:
    base = tmp_path.as_uri()
    a, chk4, _ = _source_job(base, tmp_path)
    b = _job(base, tmp_path, "b")
    b.restore(chk4)
    for epoch, abort in ((6, True), (7, False), (8, False)):
        b.run_epoch(_updates(epoch))
        b.checkpoint(abort=abort)
    b.close()
    assert b.snapshot_types == [FULL, FULL, INCREMENTAL]
    a_dir = comparable_path(a.job_dir)
    for cp in b.store.get_all_checkpoints()[1:]:
        assert not any(p.startswith(a_dir + "/") for p in _referenced(cp))
    assert audit_checkpoint_directory(b.job_dir).exact


def _params(tmp_path: Path) -> KeyedStateBackendParameters:
    return KeyedStateBackendParameters(
        "job",
        "op",
        0,
        1,
        128,
        compute_key_group_range_for_operator_index(128, 1, 0),
        str(tmp_path),
    )


def test_rocksdb_full_checkpoint_uploads_every_file_and_forgets_the_restored_ones(
    tmp_path: Path,
) -> None:
    big = MemCheckpointStreamFactory(max_state_size=1 << 30)
    source = RocksDBKeyedStateBackend(_params(tmp_path / "a"), incremental=True)
    state = source.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    for k in range(2000):
        source.set_current_key(k)
        state.update(k)
    source.commit_local(1)
    restored_handle = source.snapshot(1, big)()
    assert isinstance(restored_handle, IncrementalRemoteKeyedStateHandle)
    b = RocksDBKeyedStateBackend(_params(tmp_path / "b"), incremental=True)
    b.restore([restored_handle])
    b.commit_local(2)
    full = b.snapshot(2, big, FULL)()
    assert isinstance(full, IncrementalRemoteKeyedStateHandle)
    assert full.shared_state
    assert not any(isinstance(h.handle, PlaceholderStreamStateHandle) for h in full.shared_state)
    # not confirmed yet: a checkpoint now must not fall back to the restored files
    b.commit_local(3)
    early = b.snapshot(3, big)()
    assert isinstance(early, IncrementalRemoteKeyedStateHandle)
    assert not any(isinstance(h.handle, PlaceholderStreamStateHandle) for h in early.shared_state)
    b.notify_checkpoint_complete(2)
    b.commit_local(4)
    later = b.snapshot(4, big)()
    assert isinstance(later, IncrementalRemoteKeyedStateHandle)
    placeholders = {
        h.handle.physical_id
        for h in later.shared_state
        if isinstance(h.handle, PlaceholderStreamStateHandle)
    }
    assert placeholders and placeholders <= {h.handle.physical_id for h in full.shared_state}


def test_heap_full_checkpoint_is_an_ordinary_checkpoint(tmp_path: Path) -> None:
    big = MemCheckpointStreamFactory(max_state_size=1 << 30)
    heap = HeapKeyedStateBackend(_params(tmp_path))
    state = heap.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    heap.set_current_key(1)
    state.update(5)
    heap.commit_local(1)
    handle = heap.snapshot(1, big, FULL)()
    assert handle is not None
    with handle.delegate.open_input_stream() as stream:  # type: ignore[attr-defined]
        header = read_header(stream)
    assert header.snapshot_type == SnapshotType.CHECKPOINT
    # copied from the local commit's files: self-contained, like every heap checkpoint
    assert header.block_encoding == "pickle-chain"


def _absolute(handle: KeyedStateHandle) -> KeyedStateHandle:
    """``handle`` with its relative files named by absolute path (keep="reference")."""

    def fix(h: StreamStateHandle) -> StreamStateHandle:
        return FileStateHandle(h.path, h.size) if isinstance(h, RelativeFileStateHandle) else h

    assert isinstance(handle, IncrementalRemoteKeyedStateHandle)
    return dataclasses.replace(
        handle,
        meta_state_handle=fix(handle.meta_state_handle),
        private_state=tuple(
            HandleAndLocalPath(fix(x.handle), x.local_path) for x in handle.private_state
        ),
    )


@pytest.mark.parametrize("claim_mode", ["NO_CLAIM", "CLAIM"])
def test_a_savepoint_naming_its_source_files_restores_and_deletes_none_of_them(
    storage_base: str, tmp_path: Path, claim_mode: str
) -> None:
    """The state processor's keep="reference" writes such savepoints: they name the files
    of the snapshot they were made from, where they are."""
    a, chk4, at_four = _source_job(storage_base, tmp_path)
    metadata, _ = load_checkpoint(a.storage, chk4)
    ops = tuple(
        dataclasses.replace(
            op,
            subtask_states={
                i: dataclasses.replace(
                    s, managed_keyed_state=tuple(map(_absolute, s.managed_keyed_state))
                )
                for i, s in op.subtask_states.items()
            },
        )
        for op in metadata.operator_states
    )
    reference = f"{storage_base}/reference"
    fs = get_filesystem(reference)
    fs.mkdirs(reference)
    fs.write_atomic(
        f"{reference}/_metadata",
        store_checkpoint_metadata(
            dataclasses.replace(
                metadata, operator_states=ops, properties=CheckpointProperties.for_savepoint()
            )
        ),
    )
    a_files = _files(a.job_dir)
    b = _job(storage_base, tmp_path, "b", retained=1)
    b.restore(reference, claim_mode)
    assert b.read_all(KEYS) == at_four
    b.expected = dict(at_four)
    for epoch in (6, 7):
        b.run_epoch(_updates(epoch))
        b.checkpoint()  # the first subsumes the restored savepoint
    b.close()
    assert b.snapshot_types == [FULL, INCREMENTAL]
    assert _files(a.job_dir) == a_files
    assert fs.exists(f"{reference}/_metadata")
    get_filesystem(a.job_dir).delete(a.job_dir, recursive=True)
    c = _job(storage_base, tmp_path, "c")
    c.restore(b.store.get_latest_checkpoint().external_pointer)  # type: ignore[union-attr]
    assert c.read_all(KEYS) == b.expected
    c.close()
