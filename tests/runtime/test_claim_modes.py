"""Jobs restarted with ``execution.state-recovery.path`` on incremental RocksDB state:
NO_CLAIM (the restored snapshot can be deleted once the new job checkpointed) and CLAIM (the
job deletes it once subsumed); a crafted ``_metadata``, or one that is no regular file, is
refused before anything runs; and
the retention invariant (exactly the referenced files stay) on a real job."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.audit import audit_checkpoint_directory, referenced_files
from sparkpoint.checkpoint.discovery import load_pointer
from sparkpoint.checkpoint.handles import FileStateHandle, IncrementalRemoteKeyedStateHandle
from sparkpoint.checkpoint.metadata.file_format import store_checkpoint_metadata
from sparkpoint.common import Configuration
from sparkpoint.datastream import (
    EmbeddedRocksDBStateBackend,
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    StreamExecutionEnvironment,
)
from sparkpoint.errors import StorageError, UnsafeStatePathError
from tests.runtime.jobs.reference import (
    check_keyed_count_output,
    keyed_count_job,
    run_until_checkpoints,
)

N_EVENTS = 40_000
N_KEYS = 17


def _env(
    spark: Any,
    tmp_path: Path,
    name: str,
    retained: int = 3,
    restore: str | None = None,
    claim_mode: str | None = None,
    split: int = 500,
) -> Any:
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(split))
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    conf.set_string("execution.checkpointing.num-retained", str(retained))
    if restore is not None:
        conf.set_string("execution.state-recovery.path", restore)
        # A snapshot of another checkpoint directory (ckpt-a) is not this job's own: the
        # test vouches for it, so its sink commits are redone (docs/storage.md).
        conf.set_string("sparkpoint.snapshot.allow-pickle", "true")
    if claim_mode is not None:
        conf.set_string("execution.state-recovery.claim-mode", claim_mode)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.set_state_backend(EmbeddedRocksDBStateBackend(True))
    env.enable_checkpointing(10)
    config = env.get_checkpoint_config()
    # Asynchronous uploads end in a later epoch: two checkpoints may be in flight at once.
    config.set_max_concurrent_checkpoints(2)
    # every state file is a file (no inline state): SSTs land in shared/
    config.set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / name), file_state_size_threshold=0)
    )
    config.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    keyed_count_job(env, str(tmp_path / "out"), N_EVENTS, N_KEYS)
    return env


def _run_until(env: Any, checkpoints: int) -> tuple[str, list[str]]:
    """Run until ``checkpoints`` checkpoints completed, then cancel; returns the job
    directory and the completed checkpoints' pointers, oldest first."""
    done = run_until_checkpoints(env, checkpoints, "claim-modes")
    pointers = [s.external_pointer for s in done]
    return os.path.dirname(pointers[-1]), pointers


def _files(directory: str) -> set[str]:
    return {os.path.join(d, f) for d, _, files in os.walk(directory) for f in files}


def _check_output(tmp_path: Path) -> None:
    check_keyed_count_output(str(tmp_path / "out"), N_EVENTS, N_KEYS)


@pytest.mark.parametrize("claim_mode", ["NO_CLAIM", "CLAIM"])
def test_restored_snapshot_is_not_needed_after_the_first_checkpoint(
    spark: Any, tmp_path: Path, claim_mode: str
) -> None:
    a_dir, a_pointers = _run_until(_env(spark, tmp_path, "ckpt-a"), 3)
    restored = a_pointers[-1]
    a_files = _files(a_dir)
    a_retained = [p for p in a_pointers if os.path.exists(p)]
    assert len(a_retained) == 3 and audit_checkpoint_directory(a_dir).exact
    restored_files = referenced_files(load_pointer(restored)[0])
    assert sum(p.startswith(f"{a_dir}/shared/") for p in restored_files) >= 2

    # three retained: the restored checkpoint is subsumed by B's third one
    b_env = _env(spark, tmp_path, "ckpt-b", restore=restored, claim_mode=claim_mode)
    b_dir, b_pointers = _run_until(b_env, 3)
    assert int(b_pointers[0].rsplit("-", 1)[1]) == int(restored.rsplit("-", 1)[1]) + 1
    for pointer in b_pointers[-3:]:  # the retained ones reference B's own files only
        metadata, _ = load_pointer(pointer)
        handles = [
            h
            for op in metadata.operator_states
            for s in op.subtask_states.values()
            for h in s.managed_keyed_state
        ]
        assert handles and all(isinstance(h, IncrementalRemoteKeyedStateHandle) for h in handles)
        assert all(p.startswith(b_dir + "/") for p in referenced_files(metadata))
    if claim_mode == "CLAIM":  # owned and subsumed: gone, and nothing else of A's
        assert not os.path.exists(restored)
        assert _files(a_dir) < a_files
        assert all(os.path.exists(p) for p in a_retained[:-1])
    else:
        assert _files(a_dir) == a_files

    shutil.rmtree(a_dir)  # the user deletes the restored snapshot's job directory
    # the rest of the input in a few large epochs (records per epoch are a driver setting)
    env = _env(spark, tmp_path, "ckpt-c", restore=b_pointers[-1], split=10_000)
    env.execute("claim-modes-final")
    _check_output(tmp_path)


def test_crafted_metadata_is_refused_before_the_job_runs(spark: Any, tmp_path: Path) -> None:
    _, pointers = _run_until(_env(spark, tmp_path, "ckpt-a"), 1)
    metadata, _ = load_pointer(pointers[-1])
    op = next(o for o in metadata.operator_states if o.subtask_states[0].managed_keyed_state)
    handle = op.subtask_states[0].managed_keyed_state[0]
    assert isinstance(handle, IncrementalRemoteKeyedStateHandle)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    first = handle.shared_state[0]
    bad = FileStateHandle(str(outside / "secret"), 6)
    crafted = dataclasses.replace(
        handle, shared_state=(dataclasses.replace(first, handle=bad), *handle.shared_state[1:])
    )
    sub = dataclasses.replace(op.subtask_states[0], managed_keyed_state=(crafted,))
    altered = dataclasses.replace(
        metadata,
        operator_states=tuple(
            dataclasses.replace(o, subtask_states={**o.subtask_states, 0: sub}) if o is op else o
            for o in metadata.operator_states
        ),
    )
    metadata_file = Path(pointers[-1]) / "_metadata"
    metadata_file.write_bytes(store_checkpoint_metadata(altered))
    env = _env(spark, tmp_path, "ckpt-b", restore=pointers[-1])
    with pytest.raises(UnsafeStatePathError) as info:
        env.execute("crafted")
    assert str(metadata_file) in str(info.value)
    assert repr(str(outside / "secret")) in str(info.value)
    assert not os.path.exists(tmp_path / "ckpt-b") or _files(str(tmp_path / "ckpt-b")) == set()


class _Hung(BaseException):
    """The watchdog's alarm: the restore blocked."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Hung("the restore did not fail within 120 s")


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero"])
def test_a_metadata_that_is_no_regular_file_fails_the_restore_at_once(
    spark: Any, tmp_path: Path, kind: str
) -> None:
    """Restoring from a FIFO (which blocks an open) or a link to ``/dev/zero`` (read until
    memory runs out) is refused before anything runs, naming the file."""
    snapshot = tmp_path / "snapshots" / "chk-1"
    snapshot.mkdir(parents=True)
    metadata = snapshot / "_metadata"
    if kind == "fifo":
        os.mkfifo(metadata)
    else:
        metadata.symlink_to("/dev/zero")
    env = _env(spark, tmp_path, "ckpt-b", restore=str(snapshot))
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(120)
    try:
        with pytest.raises(StorageError) as info:
            env.execute("not-a-file")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    why = "it is a FIFO (named pipe)" if kind == "fifo" else "it is a character device"
    assert f"Refusing to read {metadata} as a file: {why}" in str(info.value)
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []


def test_a_job_leaves_exactly_the_files_its_retained_checkpoints_reference(
    spark: Any, tmp_path: Path
) -> None:
    """The retention soak's check on a real job: 30 incremental checkpoints, 3 retained."""
    job_dir, pointers = _run_until(_env(spark, tmp_path, "ckpt"), 30)
    audit = audit_checkpoint_directory(job_dir)
    assert len(pointers) >= 30
    assert audit.checkpoint_ids == tuple(int(p.rsplit("-", 1)[1]) for p in pointers[-3:])
    assert audit.unreferenced == frozenset() and audit.missing == frozenset()
    assert sum("/shared/" in f for f in audit.files) >= 2  # a shared SST per subtask
