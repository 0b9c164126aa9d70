"""After N checkpoints with retention R, storage holds exactly what the R retained ones
reference; the externalized-retention matrix on real directories; metadata through storage."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.checkpoint.audit import state_files
from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsStateHandle,
    PlaceholderStreamStateHandle,
    RelativeFileStateHandle,
    StateObject,
    StreamStateHandle,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint, write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.storage import CheckpointStorageAccess, CheckpointStorageLocation
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore
from sparkpoint.checkpoint.streams import CheckpointedStateScope
from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage
from sparkpoint.errors import MetadataFormatError
from sparkpoint.fs import get_filesystem

JOB = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
THRESHOLD = 1024
SHARED, EXCLUSIVE = CheckpointedStateScope.SHARED, CheckpointedStateScope.EXCLUSIVE


def _write(
    location: CheckpointStorageLocation, data: bytes, scope: CheckpointedStateScope
) -> StreamStateHandle:
    stream = location.create_checkpoint_state_output_stream(scope)
    stream.write(data)
    handle = stream.close_and_get_handle()
    assert handle is not None
    return handle


class IncrementalBackend:
    """A stand-in for an incremental RocksDB backend: a sliding window of SST files.

    Each checkpoint creates one new SST (uploaded to ``shared/``), drops the oldest when more
    than three are live (a "compaction"), and sends placeholders for SSTs already uploaded
    by a confirmed checkpoint, as Flink's RocksDB uploader does.
    """

    def __init__(self) -> None:
        self.live: list[str] = []
        self.confirmed: dict[str, StreamStateHandle] = {}
        self.counter = 0

    def snapshot(
        self, location: CheckpointStorageLocation, checkpoint_id: int
    ) -> tuple[IncrementalRemoteKeyedStateHandle, dict[str, StreamStateHandle]]:
        self.counter += 1
        self.live.append(f"{self.counter:06d}.sst")
        if len(self.live) > 3:
            self.live.pop(0)
        shared: list[HandleAndLocalPath] = []
        uploaded: dict[str, StreamStateHandle] = {}
        for name in self.live:
            known = self.confirmed.get(name)
            if known is not None:
                handle: StreamStateHandle = PlaceholderStreamStateHandle(
                    known.physical_id, known.state_size
                )
            else:
                handle = _write(location, name.encode() * 300, SHARED)
                uploaded[name] = handle
            shared.append(HandleAndLocalPath(handle, name))
        manifest = _write(location, b"MANIFEST" * 200, EXCLUSIVE)
        inc = IncrementalRemoteKeyedStateHandle(
            "rocks-1",
            KeyGroupRange(0, 63),
            checkpoint_id,
            tuple(shared),
            (HandleAndLocalPath(manifest, "MANIFEST-000001"),),
            ByteStreamStateHandle(f"meta-{checkpoint_id}", b"meta"),
            state_handle_id="inc",
        )
        return inc, uploaded

    def confirm(self, uploaded: dict[str, StreamStateHandle]) -> None:
        self.confirmed.update(uploaded)


def _full_handle(location: CheckpointStorageLocation, checkpoint_id: int) -> KeyGroupsStateHandle:
    data = os.urandom(4000) + checkpoint_id.to_bytes(4, "big")
    delegate = _write(location, data, EXCLUSIVE)
    return KeyGroupsStateHandle(
        KeyGroupRangeOffsets(KeyGroupRange(64, 67), (0, 1000, 2000, 3000)), delegate, "full"
    )


class Job:
    """Drives checkpoints through real storage, the store, the registry and the cleaner."""

    def __init__(self, base: str, retained: int, retention: object = None) -> None:
        self.storage = FileSystemCheckpointStorage(base, file_state_size_threshold=THRESHOLD)
        self.access: CheckpointStorageAccess = self.storage.create_checkpoint_storage(JOB)
        self.access.initialize_base_locations_for_checkpoint()
        self.job_dir = f"{base.rstrip('/')}/{JOB}"
        self.store = CompletedCheckpointStore(retained)
        self.cleaner = CheckpointsCleaner(parallel_mode=True, max_workers=3)
        self.backend = IncrementalBackend()
        self.props = CheckpointProperties.for_checkpoint(retention)
        self.registry = self.store.shared_state_registry

    def _states(
        self, location: CheckpointStorageLocation, checkpoint_id: int
    ) -> tuple[tuple[OperatorState, ...], dict[str, StreamStateHandle]]:
        inc, uploaded = self.backend.snapshot(location, checkpoint_id)
        small = _write(location, b"tiny" * 10, EXCLUSIVE)  # inline: below the threshold
        assert isinstance(small, ByteStreamStateHandle)
        keyed: tuple[KeyedStateHandle, ...] = (inc, _full_handle(location, checkpoint_id))
        ops = (
            OperatorState(
                "keyed",
                2,
                128,
                {
                    0: OperatorSubtaskState(keyed),
                    1: OperatorSubtaskState(
                        (
                            KeyGroupsStateHandle(
                                KeyGroupRangeOffsets(KeyGroupRange(68, 68), (0,)), small, "small"
                            ),
                        )
                    ),
                },
            ),
        )
        return ops, uploaded

    def checkpoint(self, checkpoint_id: int) -> CompletedCheckpoint:
        location = self.access.initialize_location_for_checkpoint(checkpoint_id)
        ops, uploaded = self._states(location, checkpoint_id)
        # on completion, shared state is registered (placeholders resolved) before _metadata
        ops = self.registry.register_all(ops, checkpoint_id)
        md = CheckpointMetadata(
            checkpoint_id,
            ops,
            (MasterState.from_json("source", {"offset": checkpoint_id}),),
            self.props,
        )
        completed = write_metadata(location, md)
        cp = CompletedCheckpoint(
            JOB,
            checkpoint_id,
            int(time.time() * 1000),
            int(time.time() * 1000),
            ops,
            self.props,
            completed,
            md,
            md.master_states,
        )
        self.store.add_checkpoint_and_subsume_oldest(cp, self.cleaner)
        self.backend.confirm(uploaded)
        return cp

    def abort(self, checkpoint_id: int) -> None:
        location = self.access.initialize_location_for_checkpoint(checkpoint_id)
        ops, _ = self._states(location, checkpoint_id)
        states: list[StateObject] = [
            h for op in ops for s in op.subtask_states.values() for h in s.all_handles()
        ]
        self.cleaner.clean_aborted_checkpoint(
            checkpoint_id, location, states, shared_state_registry=self.registry
        )

    def files(self) -> set[str]:
        fs = get_filesystem(self.job_dir)
        return {f.path for f in fs.list(self.job_dir, recursive=True) if not f.is_dir}

    def close(self) -> None:
        assert self.cleaner.wait_until_idle(30)
        self.cleaner.close()


def _referenced_files(cp: CompletedCheckpoint) -> Iterator[str]:
    metadata = cp.location.metadata_handle
    assert isinstance(metadata, FileStateHandle)
    yield metadata.path
    for op in cp.operator_states:
        for sub in op.subtask_states.values():
            for h in sub.all_handles():
                yield from state_files(h)


def _expected(job: Job) -> set[str]:
    return {p for cp in job.store.get_all_checkpoints() for p in _referenced_files(cp)}


def _norm(paths: set[str]) -> set[str]:
    return {p.removeprefix("file://") for p in paths}


@pytest.mark.parametrize("retained", [1, 2, 3])
@pytest.mark.parametrize("count", [1, 4, 9])
def test_directory_holds_exactly_what_retained_checkpoints_reference(
    tmp_path: Path, retained: int, count: int
) -> None:
    job = Job(str(tmp_path), retained)
    for i in range(1, count + 1):
        job.checkpoint(i)
        if i == 3:
            job.abort(100 + i)  # an aborted checkpoint uploads a shared file, then goes away
    job.close()
    ids = [c.checkpoint_id for c in job.store.get_all_checkpoints()]
    assert ids == list(range(max(1, count - retained + 1), count + 1))
    assert _norm(job.files()) == _norm(_expected(job))
    job_dir = tmp_path / JOB
    assert sorted(p.name for p in job_dir.iterdir()) == sorted(
        ["shared", "taskowned", *(f"chk-{i}" for i in ids)]
    )
    assert list((job_dir / "taskowned").iterdir()) == []
    # each retained checkpoint loads from its pointer and all its files are readable
    for cp in job.store.get_all_checkpoints():
        md, location = load_checkpoint(job.storage, cp.external_pointer)
        assert md == cp.metadata
        assert md.get_master_state("source").to_json() == {"offset": cp.checkpoint_id}  # type: ignore[union-attr]
        assert location.exclusive_dir is not None
        for path in _referenced_files(cp):
            assert get_filesystem(path).size(path) > 0


def test_shared_files_counts_with_retention_two(tmp_path: Path) -> None:
    job = Job(str(tmp_path), 2)
    for i in range(1, 8):
        job.checkpoint(i)
    job.close()
    shared = sorted(p.name for p in (tmp_path / JOB / "shared").iterdir())
    # the window of 3 live SSTs of checkpoint 7 plus the one checkpoint 6 still uses
    assert len(shared) == 4
    assert len(job.registry) == 4


def test_same_invariant_on_local_and_s3(storage_base: str) -> None:
    job = Job(storage_base, 2)
    for i in range(1, 5):
        job.checkpoint(i)
    job.abort(50)
    job.checkpoint(51)
    job.checkpoint(52)
    job.close()
    assert [c.checkpoint_id for c in job.store.get_all_checkpoints()] == [51, 52]
    assert _norm(job.files()) == _norm(_expected(job))
    md, _ = load_checkpoint(job.storage, job.store.get_latest_checkpoint().external_pointer)  # type: ignore[union-attr]
    assert md.checkpoint_id == 52


@pytest.mark.parametrize(
    ("retention", "status", "kept"),
    [
        ("NO_EXTERNALIZED_CHECKPOINTS", "FINISHED", False),
        ("NO_EXTERNALIZED_CHECKPOINTS", "CANCELED", False),
        ("NO_EXTERNALIZED_CHECKPOINTS", "FAILED", False),
        ("DELETE_ON_CANCELLATION", "FINISHED", False),
        ("DELETE_ON_CANCELLATION", "CANCELED", False),
        ("DELETE_ON_CANCELLATION", "FAILED", True),
        ("RETAIN_ON_CANCELLATION", "FINISHED", False),
        ("RETAIN_ON_CANCELLATION", "CANCELED", True),
        ("RETAIN_ON_CANCELLATION", "FAILED", True),
    ],
)
def test_externalized_retention_matrix_on_real_directories(
    tmp_path: Path, retention: str, status: str, kept: bool
) -> None:
    job = Job(str(tmp_path), 2, retention)
    for i in range(1, 5):
        job.checkpoint(i)
    job.close()
    expected = _expected(job)
    remaining = job.store.shutdown(status)
    if kept:
        assert [c.checkpoint_id for c in remaining] == [3, 4]
        assert _norm(job.files()) == _norm(expected)
        for cp in remaining:  # a retained checkpoint can be restored after the job ended
            md, _ = load_checkpoint(job.storage, cp.external_pointer)
            assert md.checkpoint_id == cp.checkpoint_id
    else:
        assert remaining == []
        assert job.files() == set()
        assert sorted(p.name for p in (tmp_path / JOB).iterdir()) == ["shared", "taskowned"]


def test_suspended_job_keeps_checkpoints_on_disk(tmp_path: Path) -> None:
    job = Job(str(tmp_path), 1)
    job.checkpoint(1)
    job.close()
    before = job.files()
    assert [c.checkpoint_id for c in job.store.shutdown("SUSPENDED")] == [1]
    assert job.files() == before


def test_savepoint_is_relocatable_and_survives_the_job(tmp_path: Path) -> None:
    job = Job(str(tmp_path / "chk"), 1)
    job.checkpoint(1)
    location = job.access.initialize_location_for_savepoint(2, str(tmp_path / "savepoints"))
    handle = _full_handle(location, 2)
    assert isinstance(handle.delegate, RelativeFileStateHandle)
    md = CheckpointMetadata(
        2,
        (OperatorState("keyed", 1, 128, {0: OperatorSubtaskState((handle,))}),),
        (),
        CheckpointProperties.for_savepoint(),
    )
    completed = write_metadata(location, md)
    sp = CompletedCheckpoint(
        JOB,
        2,
        0,
        0,
        md.operator_states,
        md.properties,  # type: ignore[arg-type]
        completed,
        md,
    )
    job.store.add_checkpoint_and_subsume_oldest(sp, job.cleaner)
    job.checkpoint(3)
    job.store.shutdown("CANCELED")
    job.close()
    sp_dir = Path(completed.external_pointer.removeprefix("file://"))
    assert sp_dir.name.startswith(f"savepoint-{JOB[:6]}-")
    original_bytes = handle.delegate.read_all()
    moved = tmp_path / "elsewhere" / sp_dir.name
    moved.parent.mkdir()
    sp_dir.rename(moved)
    loaded, loc = load_checkpoint(job.storage, str(moved))
    assert loc.exclusive_dir is not None
    assert loc.exclusive_dir.removeprefix("file://").rstrip("/") == str(moved)
    delegate = loaded.operator_states[0].subtask_states[0].managed_keyed_state[0].delegate  # type: ignore[attr-defined]
    assert delegate.path.removeprefix("file://").startswith(str(moved))
    assert delegate.read_all() == original_bytes
    assert loaded.checkpoint_id == 2
    # loading via the _metadata file works as well
    assert load_checkpoint(job.storage, str(moved / "_metadata"))[0] == loaded


def test_corrupt_metadata_through_storage_names_the_file(tmp_path: Path) -> None:
    job = Job(str(tmp_path), 1)
    cp = job.checkpoint(1)
    job.close()
    metadata_path = Path(cp.location.metadata_handle.path.removeprefix("file://"))  # type: ignore[attr-defined]
    data = bytearray(metadata_path.read_bytes())
    data[40] ^= 0xFF
    metadata_path.write_bytes(bytes(data))
    with pytest.raises(MetadataFormatError) as info:
        load_checkpoint(job.storage, cp.external_pointer)
    assert "checksum mismatch" in str(info.value)
    assert "_metadata" in str(info.value)
    metadata_path.write_bytes(bytes(data[:25]))
    with pytest.raises(MetadataFormatError, match="truncated at byte offset 25"):
        load_checkpoint(job.storage, cp.external_pointer)


def test_metadata_is_never_overwritten(tmp_path: Path) -> None:
    job = Job(str(tmp_path), 1)
    location = job.access.initialize_location_for_checkpoint(1)
    write_metadata(location, CheckpointMetadata(1))
    with pytest.raises(Exception, match="already exists"):
        write_metadata(location, CheckpointMetadata(1))
    job.close()


def test_unique_job_ids_do_not_interfere(tmp_path: Path) -> None:
    a = Job(str(tmp_path), 1)
    a.checkpoint(1)
    other = FileSystemCheckpointStorage(str(tmp_path)).create_checkpoint_storage(uuid.uuid4().hex)
    other.initialize_base_locations_for_checkpoint()
    a.checkpoint(2)
    a.close()
    assert (tmp_path / JOB / "chk-2").exists() and not (tmp_path / JOB / "chk-1").exists()


def test_aborted_checkpoint_leaves_nothing_behind(tmp_path: Path) -> None:
    job = Job(str(tmp_path), 2)
    job.checkpoint(1)
    job.checkpoint(2)
    before = job.files()
    job.abort(3)  # uploads a new shared SST and exclusive files, then is aborted
    assert job.cleaner.wait_until_idle(10)
    assert job.files() == before
    assert not (tmp_path / JOB / "chk-3").exists()
    job.checkpoint(4)
    job.close()
    assert _norm(job.files()) == _norm(_expected(job))


def test_jobmanager_storage_with_path_keeps_only_retained_metadata(tmp_path: Path) -> None:
    from sparkpoint.datastream.checkpoint_storage import JobManagerCheckpointStorage

    storage = JobManagerCheckpointStorage(str(tmp_path))
    access = storage.create_checkpoint_storage(JOB)
    access.initialize_base_locations_for_checkpoint()
    store = CompletedCheckpointStore(2)
    for i in range(1, 6):
        location = access.initialize_location_for_checkpoint(i)
        handle = _write(location, b"x" * 2048, EXCLUSIVE)
        assert isinstance(handle, ByteStreamStateHandle)  # in memory: inline in _metadata
        kg = KeyGroupsStateHandle(KeyGroupRangeOffsets(KeyGroupRange(0, 0), (0,)), handle, "h")
        ops = (OperatorState("op", 1, 128, {0: OperatorSubtaskState((kg,))}),)
        md = CheckpointMetadata(i, ops, (), CheckpointProperties.RETAIN_ON_CANCELLATION)
        completed = write_metadata(location, md)
        store.add_checkpoint_and_subsume_oldest(
            CompletedCheckpoint(JOB, i, 0, 0, ops, md.properties, completed, md)  # type: ignore[arg-type]
        )
    files = {str(p.relative_to(tmp_path / JOB)) for p in (tmp_path / JOB).rglob("*") if p.is_file()}
    assert files == {"chk-4/_metadata", "chk-5/_metadata"}
    md, _ = load_checkpoint(storage, str(tmp_path / JOB / "chk-5"))
    delegate = md.operator_states[0].subtask_states[0].managed_keyed_state[0].delegate  # type: ignore[attr-defined]
    assert delegate.read_all() == b"x" * 2048
    store.shutdown("CANCELED")
    assert len(list((tmp_path / JOB).rglob("_metadata"))) == 2


def test_write_metadata_refuses_unresolved_placeholders(tmp_path: Path) -> None:
    job = Job(str(tmp_path), 1)
    job.checkpoint(1)
    location = job.access.initialize_location_for_checkpoint(2)
    ops, _ = job._states(location, 2)  # checkpoint 2 reuses SST 1 through a placeholder
    with pytest.raises(ValueError, match=r"still a placeholder.*register the operator states"):
        write_metadata(location, CheckpointMetadata(2, ops))
    resolved = job.registry.register_all(ops, 2)
    write_metadata(location, CheckpointMetadata(2, resolved))
    job.close()
