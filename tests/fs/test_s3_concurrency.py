"""Create races on S3 (moto's server): exactly one writer wins, the loser gets a clear error.

Each race is run in the order that breaks a check-then-write create: every writer gets its
stream (or its metadata stream) before any of them publishes. The request log of moto's
server shows that a create is one conditional request (``If-None-Match: *``) and that no
HEAD or listing precedes it. These tests need only sparkpoint's core dependencies.
"""

from __future__ import annotations

import types
import uuid

import pytest

from sparkpoint.checkpoint import fs_streams
from sparkpoint.checkpoint.fs_location import resolve_checkpoint_pointer
from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.handles import FileStateHandle, RelativeFileStateHandle
from sparkpoint.errors import StorageError
from sparkpoint.fs.registry import create_filesystem
from tests.fixtures.s3 import S3Request, S3Server, ensure_s3_configured

pytestmark = pytest.mark.s3

JOB = "feedfacefeedfacefeedfacefeedface"
THRESHOLD = 1024


@pytest.fixture
def server(s3_server: S3Server) -> S3Server:
    ensure_s3_configured(s3_server)
    return s3_server


def driver(server: S3Server, base: str) -> FsCheckpointStorageAccess:
    """One driver's storage access, with a file system object of its own."""
    fs = create_filesystem(base, server.options)
    access = FsCheckpointStorageAccess(
        f"{base}/ckpt", None, JOB, file_size_threshold=THRESHOLD, write_buffer_size=256, fs=fs
    )
    access.initialize_base_locations_for_checkpoint()
    return access


def assert_one_conditional_put(requests: list[S3Request], key_suffix: str) -> None:
    assert [(r.method, r.path.endswith(key_suffix)) for r in requests] == [("PUT", True)]
    assert requests[0].headers.get("If-None-Match") == "*"


def test_two_writers_of_one_metadata_file(server: S3Server) -> None:
    access = driver(server, server.unique_prefix())
    location = access.initialize_location_for_checkpoint(3)
    first = location.create_metadata_output_stream()
    second = location.create_metadata_output_stream()  # both pass the open-time check
    first.write(b"metadata of the first writer")
    second.write(b"metadata of the second writer")
    completed = first.close_and_finalize_checkpoint()
    with server.record() as requests, pytest.raises(StorageError) as lost:
        second.close_and_finalize_checkpoint()
    assert str(lost.value) == f"Target file {location.metadata_file_path} already exists."
    assert isinstance(lost.value.__cause__, FileExistsError)
    assert_one_conditional_put(requests, "/chk-3/_metadata")
    assert completed.metadata_handle.read_all() == b"metadata of the first writer"
    assert access.fs.read_bytes(location.metadata_file_path) == b"metadata of the first writer"


@pytest.mark.parametrize("size", [64 * 1024, 9 * 1024 * 1024], ids=["one-put", "multipart"])
def test_two_attempts_of_one_state_file(
    server: S3Server, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    access = driver(server, server.unique_prefix())
    location = access.initialize_location_for_checkpoint(4)
    # Both attempts draw the same file name, as two attempts of one deterministic writer would.
    name = uuid.uuid4()
    monkeypatch.setattr(fs_streams, "uuid", types.SimpleNamespace(uuid4=lambda: name))
    first = location.create_checkpoint_state_output_stream()
    second = location.create_checkpoint_state_output_stream()
    first.write(b"1" * size)
    second.write(b"2" * size)  # both streams now have their file open
    handle = first.close_and_get_handle()
    assert isinstance(handle, RelativeFileStateHandle)
    with server.record() as requests, pytest.raises(StorageError) as lost:
        second.close_and_get_handle()
    path = f"{location.checkpoint_directory}/{name}"
    assert str(lost.value) == (
        f"Could not publish the state file {path}: another writer created it first"
    )
    assert isinstance(lost.value.__cause__, FileExistsError)
    assert {r.method for r in requests} <= {"PUT", "POST", "DELETE"}  # no HEAD, GET or list
    conditional = [r for r in requests if r.headers.get("If-None-Match") == "*"]
    assert len(conditional) == 1
    if size > 8 * 1024 * 1024:  # the parts were uploaded, the completion refused and aborted
        assert conditional[0].method == "POST" and "uploadId=" in conditional[0].path
        assert requests[-1].method == "DELETE" and "uploadId=" in requests[-1].path
    else:
        assert_one_conditional_put(requests, f"/chk-4/{name}")
    assert access.fs.read_bytes(path) == b"1" * size  # the loser did not delete the winner's file
    assert handle.read_all() == b"1" * size


def test_aborted_attempt_leaves_the_winners_file(
    server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    access = driver(server, server.unique_prefix())
    location = access.initialize_location_for_checkpoint(5)
    name = uuid.uuid4()
    monkeypatch.setattr(fs_streams, "uuid", types.SimpleNamespace(uuid4=lambda: name))
    first = location.create_checkpoint_state_output_stream()
    second = location.create_checkpoint_state_output_stream()
    first.write(b"a" * 4096)
    second.write(b"b" * 4096)
    assert first.close_and_get_handle() is not None
    with server.record() as requests:
        second.close()  # a cancelled attempt: publishes nothing, deletes nothing
    assert requests == []
    assert access.fs.read_bytes(f"{location.checkpoint_directory}/{name}") == b"a" * 4096


def test_zombie_driver_cannot_complete_a_checkpoint_the_new_driver_wrote(
    server: S3Server,
) -> None:
    base = server.unique_prefix()
    zombie = driver(server, base)
    zombie_location = zombie.initialize_location_for_checkpoint(7)
    stream = zombie_location.create_checkpoint_state_output_stream()
    stream.write(b"z" * 4096)
    zombie_state = stream.close_and_get_handle()
    zombie_metadata = zombie_location.create_metadata_output_stream()
    zombie_metadata.write(b"zombie driver's checkpoint 7")
    # The old driver stalls; a new driver takes over the job and completes checkpoint 7.
    new = driver(server, base)
    new_location = new.initialize_location_for_checkpoint(7)
    stream = new_location.create_checkpoint_state_output_stream()
    stream.write(b"n" * 4096)
    new_state = stream.close_and_get_handle()
    new_metadata = new_location.create_metadata_output_stream()
    new_metadata.write(b"new driver's checkpoint 7")
    new_metadata.close_and_finalize_checkpoint()
    # The zombie wakes up and tries to complete the same checkpoint.
    with server.record() as requests, pytest.raises(StorageError, match="already exists"):
        zombie_metadata.close_and_finalize_checkpoint()
    assert_one_conditional_put(requests, "/chk-7/_metadata")
    resolved = resolve_checkpoint_pointer(new_location.exclusive_dir)
    assert resolved.metadata_handle.read_all() == b"new driver's checkpoint 7"
    assert isinstance(new_state, FileStateHandle) and isinstance(zombie_state, FileStateHandle)
    assert new_state.path != zombie_state.path  # distinct names: the new state is intact
    assert new_state.read_all() == b"n" * 4096


def test_state_streams_send_no_existence_checks(server: S3Server) -> None:
    access = driver(server, server.unique_prefix())
    location = access.initialize_location_for_checkpoint(9)
    with server.record() as requests:
        streams = [location.create_checkpoint_state_output_stream() for _ in range(8)]
        for i, stream in enumerate(streams):
            stream.write(bytes([i]) * (THRESHOLD * 4 if i < 5 else THRESHOLD // 2))
    assert requests == []  # opening and filling the buffers sent nothing
    with server.record() as requests:
        handles = [stream.close_and_get_handle() for stream in streams]
    files = [h for h in handles if isinstance(h, FileStateHandle)]
    assert len(files) == 5  # three were inline
    assert [r.method for r in requests] == ["PUT"] * 5
    assert all(r.headers.get("If-None-Match") == "*" for r in requests)
    assert sorted(r.path.rsplit("/", 1)[1] for r in requests) == sorted(
        f.path.rsplit("/", 1)[1] for f in files
    )
