"""MemCheckpointStorageAccess: in-memory checkpoints, persisted metadata, savepoints."""

from __future__ import annotations

import pytest

from sparkpoint.checkpoint.handles import ByteStreamStateHandle, FileStateHandle
from sparkpoint.checkpoint.mem_storage import (
    NOT_EXTERNALLY_ADDRESSABLE,
    MemCheckpointStorageAccess,
    NonPersistentMetadataCheckpointStorageLocation,
    PersistentMetadataCheckpointStorageLocation,
)
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory, StateSizeExceededError
from sparkpoint.checkpoint.storage import write_metadata_bytes
from sparkpoint.fs import get_filesystem

JOB = "00112233445566778899aabbccddeeff"


def test_memory_only_checkpoint() -> None:
    access = MemCheckpointStorageAccess(JOB, None, None, 64)
    assert not access.supports_highly_available_storage()
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(1)
    assert isinstance(location, NonPersistentMetadataCheckpointStorageLocation)
    assert location.exclusive_dir is None
    stream = location.create_checkpoint_state_output_stream()
    stream.write(b"state")
    assert isinstance(stream.close_and_get_handle(), ByteStreamStateHandle)
    completed = write_metadata_bytes(location, b"meta")
    assert completed.external_pointer == NOT_EXTERNALLY_ADDRESSABLE
    assert completed.exclusive_dir is None
    assert isinstance(completed.metadata_handle, ByteStreamStateHandle)
    assert completed.metadata_handle.read_all() == b"meta"
    completed.dispose_storage_location()  # nothing on disk: a no-op
    location.dispose_on_failure()


def test_state_cap_applies_to_worker_streams() -> None:
    access = MemCheckpointStorageAccess(JOB, None, None, 4)
    factory = access.resolve_checkpoint_storage_location(
        1, access.initialize_location_for_checkpoint(1).get_location_reference()
    )
    assert isinstance(factory, MemCheckpointStreamFactory)
    stream = factory.create_checkpoint_state_output_stream()
    stream.write(b"12345")
    with pytest.raises(StateSizeExceededError, match=r"Size=5 , maxSize=4 \."):
        stream.close_and_get_handle()
    owned = access.create_task_owned_state_stream()
    owned.write(b"123")
    assert isinstance(owned.close_and_get_handle(), ByteStreamStateHandle)


def test_persisted_metadata(storage_base: str) -> None:
    access = MemCheckpointStorageAccess(JOB, f"{storage_base}/cp", None)
    assert access.supports_highly_available_storage()
    location = access.initialize_location_for_checkpoint(2)
    assert isinstance(location, PersistentMetadataCheckpointStorageLocation)
    stream = location.create_checkpoint_state_output_stream()
    stream.write(b"s" * 50_000)  # far above any file threshold: still inline
    assert isinstance(stream.close_and_get_handle(), ByteStreamStateHandle)
    completed = write_metadata_bytes(location, b"persisted")
    chk = f"{storage_base}/cp/{JOB}/chk-2"
    assert completed.external_pointer == chk
    assert isinstance(completed.metadata_handle, FileStateHandle)
    resolved = access.resolve_checkpoint(chk)
    assert resolved.metadata_handle.read_all() == b"persisted"
    fs = get_filesystem(storage_base)
    assert [i.path for i in fs.list(chk, recursive=True)] == [f"{chk}/_metadata"]
    location.dispose_on_failure()
    assert not fs.exists(chk)


def test_savepoints_go_to_a_filesystem(storage_base: str) -> None:
    access = MemCheckpointStorageAccess(JOB, None, f"{storage_base}/sp")
    assert access.has_default_savepoint_location()
    location = access.initialize_location_for_savepoint(3, None)
    assert str(location.exclusive_dir).startswith(f"{storage_base}/sp/savepoint-001122-")
    assert location.get_location_reference().is_default_reference()
    completed = write_metadata_bytes(location, b"sp")
    assert access.resolve_checkpoint(completed.external_pointer).metadata_handle.read_all() == b"sp"


def test_validation() -> None:
    with pytest.raises(ValueError, match="max_state_size must be > 0"):
        MemCheckpointStorageAccess(JOB, None, None, 0)
    with pytest.raises(ValueError, match="job_id"):
        MemCheckpointStorageAccess("", None, None)
    with pytest.raises(ValueError, match="Illegal negative checkpoint id"):
        MemCheckpointStorageAccess(JOB, None, None).initialize_location_for_checkpoint(-3)
