"""Savepoints: directory naming, self-containment, relocation, and Flink's errors."""

from __future__ import annotations

import re

import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess, random_filename
from sparkpoint.checkpoint.handles import RelativeFileStateHandle
from sparkpoint.checkpoint.storage import (
    CheckpointStorageLocation,
    CheckpointStorageLocationReference,
    write_metadata_bytes,
)
from sparkpoint.checkpoint.streams import CheckpointedStateScope
from sparkpoint.fs import FileSystem, get_filesystem

JOB = "fedcba9876543210fedcba9876543210"


def access_for(base: str, default_savepoints: str | None = None) -> FsCheckpointStorageAccess:
    access = FsCheckpointStorageAccess(f"{base}/cp", default_savepoints, JOB, 100, 100)
    access.initialize_base_locations_for_checkpoint()
    return access


def sp_dir(location: CheckpointStorageLocation) -> str:
    """The savepoint directory of a location (always set for savepoints)."""
    directory = location.exclusive_dir
    assert directory is not None
    return directory


def copy_tree(fs: FileSystem, src: str, dst: str) -> None:
    fs.mkdirs(dst)
    for info in fs.list(src, recursive=True):
        target = dst + info.path[len(src) :]
        if info.is_dir:
            fs.mkdirs(target)
        else:
            fs.write_atomic(target, fs.read_bytes(info.path))


def test_random_filename_uses_flinks_alphabet() -> None:
    names = {random_filename("p-") for _ in range(200)}
    assert len(names) == 200
    assert all(re.fullmatch(r"p-[0-9a-f]{12}", n) for n in names)


def test_savepoint_directory_name_and_reference(storage_base: str) -> None:
    access = access_for(storage_base)
    location = access.initialize_location_for_savepoint(5, f"{storage_base}/sp")
    assert re.fullmatch(
        re.escape(f"{storage_base}/sp/") + r"savepoint-fedcba-[0-9a-f]{12}", sp_dir(location)
    )
    reference = location.get_location_reference()
    assert not reference.is_default_reference()
    assert reference.get_reference_bytes()[:4] == bytes([0x05, 0x5F, 0x3F, 0x18])
    assert reference.to_path() == sp_dir(location)


def test_savepoint_is_self_contained(storage_base: str) -> None:
    access = access_for(storage_base)
    location = access.initialize_location_for_savepoint(5, f"{storage_base}/sp")
    worker = access.resolve_checkpoint_storage_location(5, location.get_location_reference())
    for scope in CheckpointedStateScope:
        stream = worker.create_checkpoint_state_output_stream(scope)
        stream.write(scope.value.encode() * 100)
        handle = stream.close_and_get_handle()
        assert handle is not None
        assert handle.physical_id.startswith(sp_dir(location) + "/")
    task_owned = worker.task_owned_state_directory
    assert task_owned == sp_dir(location)
    fs = get_filesystem(storage_base)
    assert [i for i in fs.list(f"{storage_base}/cp/{JOB}", recursive=True) if not i.is_dir] == []


def test_savepoint_relocates_with_relative_handles(storage_base: str) -> None:
    access = access_for(storage_base)
    location = access.initialize_location_for_savepoint(8, f"{storage_base}/sp")
    stream = location.create_checkpoint_state_output_stream()
    stream.write(b"exclusive-state" * 20)
    handle = stream.close_and_get_handle()
    assert isinstance(handle, RelativeFileStateHandle)
    write_metadata_bytes(location, handle.relative_path.encode())
    fs = get_filesystem(storage_base)
    moved = f"{storage_base}/moved/{sp_dir(location).rsplit('/', 1)[1]}"
    copy_tree(fs, sp_dir(location), moved)
    fs.delete(sp_dir(location), recursive=True)
    resolved = access.resolve_checkpoint(moved)
    assert resolved.external_pointer == moved and resolved.exclusive_dir == moved
    relative = resolved.metadata_handle.read_all().decode()
    assert fs.read_bytes(fs.join(resolved.exclusive_dir, relative)) == b"exclusive-state" * 20


def test_default_savepoint_directory(storage_base: str) -> None:
    access = access_for(storage_base, default_savepoints=f"{storage_base}/default-sp")
    assert access.has_default_savepoint_location()
    location = access.initialize_location_for_savepoint(1, None)
    assert sp_dir(location).startswith(f"{storage_base}/default-sp/savepoint-fedcba-")


def test_no_savepoint_location(storage_base: str) -> None:
    access = access_for(storage_base)
    assert not access.has_default_savepoint_location()
    with pytest.raises(
        ValueError, match=r"^No savepoint location given and no default location configured\.$"
    ):
        access.initialize_location_for_savepoint(1, None)
    with pytest.raises(ValueError, match="Savepoint target must be a non-empty path"):
        access.initialize_location_for_savepoint(1, "")


def test_two_savepoints_get_distinct_directories(storage_base: str) -> None:
    access = access_for(storage_base)
    a = access.initialize_location_for_savepoint(1, f"{storage_base}/sp")
    b = access.initialize_location_for_savepoint(1, f"{storage_base}/sp")
    assert sp_dir(a) != sp_dir(b)


def test_default_reference_round_trip() -> None:
    ref = CheckpointStorageLocationReference.DEFAULT
    assert ref.is_default_reference()
    assert ref.get_reference_bytes() == b""
    assert CheckpointStorageLocationReference.get_default() is ref
    with pytest.raises(ValueError, match="default reference"):
        ref.to_path()
    with pytest.raises(ValueError, match="wrong magic"):
        CheckpointStorageLocationReference(b"\x00\x01\x02\x03/x").to_path()
    with pytest.raises(ValueError, match="must not be empty"):
        CheckpointStorageLocationReference(b"")
