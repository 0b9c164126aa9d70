"""FsCheckpointStorageAccess on local disk and on S3 (moto): layout, locations, metadata."""

from __future__ import annotations

import re

import pytest

from sparkpoint.checkpoint.fs_location import FsCheckpointStorageLocation
from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    RelativeFileStateHandle,
)
from sparkpoint.checkpoint.storage import (
    CheckpointStorageLocationReference,
    write_metadata_bytes,
)
from sparkpoint.checkpoint.streams import CheckpointedStateScope
from sparkpoint.errors import StorageError
from sparkpoint.fs import get_filesystem

JOB = "0123456789abcdef0123456789abcdef"
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def make_access(base: str, **kwargs) -> FsCheckpointStorageAccess:  # type: ignore[no-untyped-def]
    kwargs.setdefault("file_size_threshold", 100)
    kwargs.setdefault("write_buffer_size", 64)
    access = FsCheckpointStorageAccess(f"{base}/checkpoints", None, JOB, **kwargs)
    access.initialize_base_locations_for_checkpoint()
    return access


def files_under(base: str) -> list[str]:
    fs = get_filesystem(base)
    return sorted(i.path[len(base) + 1 :] for i in fs.list(base, recursive=True) if not i.is_dir)


def write_state(factory, data: bytes, scope=CheckpointedStateScope.EXCLUSIVE):  # type: ignore[no-untyped-def]
    stream = factory.create_checkpoint_state_output_stream(scope)
    stream.write(data)
    return stream.close_and_get_handle()


def test_layout(storage_base: str) -> None:
    access = make_access(storage_base)
    job_dir = f"{storage_base}/checkpoints/{JOB}"
    assert access.checkpoints_directory == job_dir
    assert access.shared_state_directory == f"{job_dir}/shared"
    assert access.task_owned_state_directory == f"{job_dir}/taskowned"
    location = access.initialize_location_for_checkpoint(7)
    assert isinstance(location, FsCheckpointStorageLocation)
    assert location.exclusive_dir == f"{job_dir}/chk-7"
    assert location.get_location_reference().is_default_reference()
    fs = get_filesystem(storage_base)
    if not fs.is_object_store:  # object stores have no directories to create
        assert fs.is_dir(f"{job_dir}/shared")
        assert fs.is_dir(f"{job_dir}/taskowned")
        assert fs.is_dir(f"{job_dir}/chk-7")


def test_no_job_subdirectory_when_disabled(storage_base: str) -> None:
    access = make_access(storage_base, create_checkpoint_sub_dir=False)
    assert access.checkpoints_directory == f"{storage_base}/checkpoints"
    assert access.initialize_location_for_checkpoint(1).exclusive_dir == (
        f"{storage_base}/checkpoints/chk-1"
    )


def test_negative_checkpoint_id(storage_base: str) -> None:
    with pytest.raises(ValueError, match=r"Illegal negative checkpoint id: -1\."):
        make_access(storage_base).initialize_location_for_checkpoint(-1)


def test_exclusive_shared_and_inline_state(storage_base: str) -> None:
    access = make_access(storage_base)
    location = access.initialize_location_for_checkpoint(1)
    worker = access.resolve_checkpoint_storage_location(1, location.get_location_reference())
    small = write_state(worker, b"s" * 100)
    big = write_state(worker, b"b" * 101)
    shared = write_state(worker, b"h" * 500, CheckpointedStateScope.SHARED)
    assert isinstance(small, ByteStreamStateHandle)
    assert isinstance(big, RelativeFileStateHandle)
    assert type(shared) is FileStateHandle
    assert big.read_all() == b"b" * 101 and shared.read_all() == b"h" * 500
    names = files_under(f"{storage_base}/checkpoints/{JOB}")
    assert len(names) == 2
    assert re.fullmatch(f"chk-1/{UUID_RE}", names[0]), names
    assert re.fullmatch(f"shared/{UUID_RE}", names[1]), names


def test_task_owned_stream(storage_base: str) -> None:
    access = make_access(storage_base)
    stream = access.create_task_owned_state_stream()
    stream.write(b"t" * 1000)
    handle = stream.close_and_get_handle()
    assert type(handle) is FileStateHandle
    assert handle.path.startswith(f"{storage_base}/checkpoints/{JOB}/taskowned/")


def test_metadata_published_once_and_resolvable(storage_base: str) -> None:
    access = make_access(storage_base)
    location = access.initialize_location_for_checkpoint(3)
    completed = write_metadata_bytes(location, b"META" * 10)
    chk = f"{storage_base}/checkpoints/{JOB}/chk-3"
    assert completed.external_pointer == chk
    assert completed.exclusive_dir == chk
    assert isinstance(completed.metadata_handle, FileStateHandle)
    assert completed.metadata_handle.path == f"{chk}/_metadata"
    assert completed.metadata_handle.read_all() == b"META" * 10
    for pointer in (chk, f"{chk}/", f"{chk}/_metadata"):
        resolved = access.resolve_checkpoint(pointer)
        assert resolved.external_pointer == chk
        assert resolved.exclusive_dir == chk
        assert resolved.metadata_handle == completed.metadata_handle
        assert resolved.metadata_handle.state_size == 40


def test_metadata_never_overwritten(storage_base: str) -> None:
    access = make_access(storage_base)
    location = access.initialize_location_for_checkpoint(3)
    write_metadata_bytes(location, b"first")
    target = f"{storage_base}/checkpoints/{JOB}/chk-3/_metadata"
    with pytest.raises(StorageError, match=re.escape(f"Target file {target} already exists.")):
        location.create_metadata_output_stream()
    assert get_filesystem(target).read_bytes(target) == b"first"


def test_metadata_race_between_two_streams(storage_base: str) -> None:
    access = make_access(storage_base)
    location = access.initialize_location_for_checkpoint(4)
    first = location.create_metadata_output_stream()
    second = location.create_metadata_output_stream()
    first.write(b"one")
    second.write(b"two")
    first.close_and_finalize_checkpoint()
    with pytest.raises(StorageError, match="already exists"):
        second.close_and_finalize_checkpoint()
    target = f"{storage_base}/checkpoints/{JOB}/chk-4/_metadata"
    assert get_filesystem(target).read_bytes(target) == b"one"


def test_aborted_metadata_stream_leaves_nothing(storage_base: str) -> None:
    access = make_access(storage_base)
    location = access.initialize_location_for_checkpoint(5)
    with location.create_metadata_output_stream() as out:
        out.write(b"partial")
    assert out.closed
    fs = get_filesystem(storage_base)
    assert not fs.exists(f"{storage_base}/checkpoints/{JOB}/chk-5/_metadata")
    with pytest.raises(StorageError, match="already been closed"):
        out.close_and_finalize_checkpoint()


def test_dispose_on_failure_and_dispose_storage_location(storage_base: str) -> None:
    access = make_access(storage_base)
    failed = access.initialize_location_for_checkpoint(1)
    write_state(failed, b"x" * 1000)
    failed.dispose_on_failure()
    good = access.initialize_location_for_checkpoint(2)
    write_state(good, b"y" * 1000)
    completed = write_metadata_bytes(good, b"M")
    job = f"{storage_base}/checkpoints/{JOB}"
    assert [n.split("/")[0] for n in files_under(job)] == ["chk-2", "chk-2"]
    completed.dispose_storage_location()
    assert files_under(job) == []
    fs = get_filesystem(storage_base)
    assert not fs.exists(f"{job}/chk-2")


def test_worker_resolves_explicit_reference(storage_base: str) -> None:
    access = make_access(storage_base)
    target = f"{storage_base}/elsewhere"
    get_filesystem(target).mkdirs(target)
    reference = CheckpointStorageLocationReference.for_path(target)
    worker = access.resolve_checkpoint_storage_location(9, reference)
    handle = write_state(worker, b"r" * 300, CheckpointedStateScope.SHARED)
    assert isinstance(handle, FileStateHandle)
    assert handle.path.startswith(f"{target}/")


def test_sixty_four_subtasks_of_2_kib_leave_only_metadata(storage_base: str) -> None:
    from sparkpoint.checkpoint.handles import KeyGroupRangeOffsets, KeyGroupsStateHandle
    from sparkpoint.checkpoint.key_group_range import KeyGroupRange
    from sparkpoint.checkpoint.metadata import (
        CheckpointMetadata,
        OperatorState,
        OperatorSubtaskState,
    )
    from sparkpoint.checkpoint.metadata.file_format import load_checkpoint, write_metadata

    access = FsCheckpointStorageAccess(f"{storage_base}/checkpoints", None, JOB)  # 20 KiB inline
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(1)
    subtasks = {}
    for i in range(64):
        worker = access.resolve_checkpoint_storage_location(1, location.get_location_reference())
        handle = write_state(worker, bytes([i]) * 2048)
        assert isinstance(handle, ByteStreamStateHandle)
        kg = KeyGroupRange.of(2 * i, 2 * i + 1)
        keyed = KeyGroupsStateHandle(KeyGroupRangeOffsets(kg, (0, 1024)), handle)
        subtasks[i] = OperatorSubtaskState(managed_keyed_state=(keyed,))
    metadata = CheckpointMetadata(1, (OperatorState("op", 64, 128, subtasks),))
    completed = write_metadata(location, metadata)
    assert files_under(f"{storage_base}/checkpoints") == [f"{JOB}/chk-1/_metadata"]
    loaded, where = load_checkpoint(access, completed.external_pointer)
    assert where.external_pointer == completed.external_pointer
    (op,) = loaded.operator_states
    restored = op.subtask_states[63].managed_keyed_state[0]
    assert isinstance(restored, KeyGroupsStateHandle)
    assert restored.delegate.read_all() == bytes([63]) * 2048


def test_access_and_worker_factory_pickle(storage_base: str) -> None:
    import pickle

    access = make_access(storage_base)
    location = access.initialize_location_for_checkpoint(6)
    shipped = pickle.loads(pickle.dumps(access))
    worker = shipped.resolve_checkpoint_storage_location(6, location.get_location_reference())
    worker = pickle.loads(pickle.dumps(worker))
    handle = write_state(worker, b"p" * 1000)
    assert isinstance(handle, RelativeFileStateHandle)
    assert handle.path.startswith(f"{storage_base}/checkpoints/{JOB}/chk-6/")
    assert handle.read_all() == b"p" * 1000


@pytest.mark.s3
def test_entropy_injection_on_s3(s3_server) -> None:  # type: ignore[no-untyped-def]
    from sparkpoint.fs.registry import create_filesystem

    options = {**s3_server.options, "s3.entropy.key": "_entropy_", "s3.entropy.length": "4"}
    root = s3_server.unique_prefix()
    base = f"{root}/_entropy_/checkpoints"
    fs = create_filesystem(base, options)
    access = FsCheckpointStorageAccess(base, None, JOB, 100, 100, fs=fs)
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(2)
    assert location.exclusive_dir == f"{root}/checkpoints/{JOB}/chk-2"
    exclusive = write_state(location, b"e" * 500)
    shared = write_state(location, b"s" * 500, CheckpointedStateScope.SHARED)
    inline = write_state(location, b"i" * 10)
    assert isinstance(inline, ByteStreamStateHandle)
    for handle, tail in (
        (exclusive, f"checkpoints/{JOB}/chk-2/"),
        (shared, f"checkpoints/{JOB}/shared/"),
    ):
        assert type(handle) is FileStateHandle  # entropy: never relative
        assert re.fullmatch(
            re.escape(root) + "/[A-Za-z0-9]{4}/" + re.escape(tail) + UUID_RE, handle.path
        )
        assert handle.read_all()[:1] in (b"e", b"s")
    completed = write_metadata_bytes(location, b"M")
    assert completed.metadata_handle.physical_id == f"{root}/checkpoints/{JOB}/chk-2/_metadata"
    assert access.resolve_checkpoint(completed.external_pointer).metadata_handle.read_all() == b"M"
