"""FsCheckpointStreamFactory / FsCheckpointStateOutputStream: Flink's exact behaviour."""

from __future__ import annotations

import os
import re
import uuid

import pytest

from sparkpoint.checkpoint.fs_streams import (
    MAX_FILE_STATE_THRESHOLD,
    FsCheckpointStateOutputStream,
    FsCheckpointStreamFactory,
)
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    RelativeFileStateHandle,
)
from sparkpoint.checkpoint.streams import CheckpointedStateScope
from sparkpoint.errors import StorageError
from sparkpoint.fs.fsspec_fs import FsspecFileSystem
from tests.fixtures.counting_fs import CountingFileSystem

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
EXCLUSIVE = CheckpointedStateScope.EXCLUSIVE
SHARED = CheckpointedStateScope.SHARED


@pytest.fixture
def dirs(tmp_path):  # type: ignore[no-untyped-def]
    chk, shared = tmp_path / "chk-1", tmp_path / "shared"
    chk.mkdir()
    shared.mkdir()
    return str(chk), str(shared)


def factory(dirs, threshold: int = 100, buffer: int = 50, fs=None):  # type: ignore[no-untyped-def]
    return FsCheckpointStreamFactory(
        fs or CountingFileSystem(), dirs[0], dirs[1], threshold, buffer
    )


# ---- constructor ------------------------------------------------------------------------


def test_constructor_validation(dirs) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    with pytest.raises(ValueError, match="zero or larger"):
        FsCheckpointStreamFactory(fs, dirs[0], dirs[1], -1, 10)
    with pytest.raises(ValueError, match="write buffer size must be zero or larger"):
        FsCheckpointStreamFactory(fs, dirs[0], dirs[1], 10, -1)
    with pytest.raises(ValueError, match="cannot be larger than 1048576"):
        FsCheckpointStreamFactory(fs, dirs[0], dirs[1], MAX_FILE_STATE_THRESHOLD + 1, 10)
    FsCheckpointStreamFactory(fs, dirs[0], dirs[1], MAX_FILE_STATE_THRESHOLD, 0)
    assert MAX_FILE_STATE_THRESHOLD == 1024 * 1024


def test_stream_rejects_buffer_below_threshold(dirs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="must not be smaller"):
        FsCheckpointStateOutputStream(dirs[0], CountingFileSystem(), 10, 11)


def test_buffer_is_max_of_write_buffer_and_threshold(dirs) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    # threshold 100 > buffer 50: a 99-byte write still fits the (100-byte) buffer.
    stream = factory(dirs, 100, 50, fs).create_checkpoint_state_output_stream()
    stream.write(b"x" * 99)
    assert fs.calls["open_output"] == 0
    # buffer 200 > threshold 100: 150 bytes stay buffered until closing.
    stream = factory(dirs, 100, 200, fs).create_checkpoint_state_output_stream()
    stream.write(b"x" * 150)
    assert fs.calls["open_output"] == 0
    handle = stream.close_and_get_handle()
    assert isinstance(handle, RelativeFileStateHandle)
    assert fs.calls["open_output"] == 1


# ---- handles ----------------------------------------------------------------------------


def test_nothing_written_gives_none_and_no_file(dirs) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    assert (
        factory(dirs, fs=fs).create_checkpoint_state_output_stream().close_and_get_handle() is None
    )
    assert fs.calls["open_output"] == 0
    assert os.listdir(dirs[0]) == []


@pytest.mark.parametrize("size", [1, 99, 100])
def test_at_or_below_threshold_is_inline(dirs, size: int) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    stream = factory(dirs, 100, 50, fs).create_checkpoint_state_output_stream()
    data = os.urandom(size)
    stream.write(data)
    stream.flush()  # at or below the threshold a flush must not create a file
    handle = stream.close_and_get_handle()
    assert isinstance(handle, ByteStreamStateHandle)
    assert handle.data == data
    assert re.fullmatch(re.escape(dirs[0]) + "/" + UUID_RE, handle.handle_name)
    assert fs.calls["open_output"] == 0
    assert os.listdir(dirs[0]) == []


def test_above_threshold_goes_to_uuid_file_relative_in_exclusive_scope(dirs) -> None:  # type: ignore[no-untyped-def]
    stream = factory(dirs, 100, 50).create_checkpoint_state_output_stream(EXCLUSIVE)
    data = os.urandom(101)
    stream.write(data)
    handle = stream.close_and_get_handle()
    assert isinstance(handle, RelativeFileStateHandle)
    assert re.fullmatch(UUID_RE, handle.relative_path)
    assert handle.path == f"{dirs[0]}/{handle.relative_path}"
    assert handle.state_size == 101
    assert handle.read_all() == data
    assert os.listdir(dirs[0]) == [handle.relative_path]


def test_shared_scope_goes_to_shared_dir_with_absolute_handle(dirs) -> None:  # type: ignore[no-untyped-def]
    stream = factory(dirs, 10, 10).create_checkpoint_state_output_stream(SHARED)
    stream.write(b"s" * 50)
    handle = stream.close_and_get_handle()
    assert type(handle) is FileStateHandle
    assert re.fullmatch(re.escape(dirs[1]) + "/" + UUID_RE, handle.path)
    assert os.listdir(dirs[0]) == []
    assert len(os.listdir(dirs[1])) == 1


def test_every_stream_gets_a_distinct_uuid_file(dirs) -> None:  # type: ignore[no-untyped-def]
    f = factory(dirs, 0, 0)
    paths = set()
    for i in range(20):
        s = f.create_checkpoint_state_output_stream()
        s.write(bytes([i]) * 5)
        h = s.close_and_get_handle()
        assert isinstance(h, FileStateHandle)
        paths.add(h.path)
    assert len(paths) == 20
    assert len(os.listdir(dirs[0])) == 20


def test_large_writes_bypass_the_buffer_and_sizes_add_up(dirs) -> None:  # type: ignore[no-untyped-def]
    stream = factory(dirs, 100, 100).create_checkpoint_state_output_stream()
    parts = [b"a" * 30, b"b" * 500, b"c" * 99, b"d" * 100, b"e" * 1]
    for p in parts:
        assert stream.write(p) == len(p)
    assert stream.tell() == sum(map(len, parts)) == stream.get_pos()
    handle = stream.close_and_get_handle()
    assert handle is not None and handle.read_all() == b"".join(parts)
    assert handle.state_size == 730


def test_memoryview_and_bytearray_input(dirs) -> None:  # type: ignore[no-untyped-def]
    stream = factory(dirs, 100, 100).create_checkpoint_state_output_stream()
    stream.write(bytearray(b"ab"))
    stream.write(memoryview(b"cdef")[1:3])
    import array

    stream.write(memoryview(array.array("i", [1])))  # 4 bytes, itemsize 4
    handle = stream.close_and_get_handle()
    assert isinstance(handle, ByteStreamStateHandle)
    assert handle.data == b"abde" + array.array("i", [1]).tobytes()


# ---- flush ------------------------------------------------------------------------------


def test_flush_creates_a_file_only_above_threshold(dirs) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    stream = factory(dirs, 100, 200, fs).create_checkpoint_state_output_stream()
    stream.write(b"x" * 100)
    stream.flush()
    assert fs.calls["open_output"] == 0
    stream.write(b"x")
    stream.flush()
    assert fs.calls["open_output"] == 1
    (name,) = os.listdir(dirs[0])
    assert os.path.getsize(os.path.join(dirs[0], name)) == 101
    stream.write(b"y")
    stream.flush()  # a file is open: the byte goes to it even though pos <= threshold
    assert os.path.getsize(os.path.join(dirs[0], name)) == 102
    handle = stream.close_and_get_handle()
    assert isinstance(handle, FileStateHandle) and handle.state_size == 102


# ---- no mkdir, no existence checks ----------------------------------------------------


def test_tasks_never_mkdir_or_check_existence(dirs) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    f = factory(dirs, 100, 50, fs)
    for i in range(30):
        for scope in (EXCLUSIVE, SHARED):
            s = f.create_checkpoint_state_output_stream(scope)
            s.write(bytes([i]) * (10 if i % 2 else 1000))
            s.flush()
            assert s.close_and_get_handle() is not None
    assert fs.calls["open_output"] == 30
    for call in ("exists", "is_dir", "mkdirs", "list", "size"):
        assert fs.calls[call] == 0, call


def test_missing_directory_fails_instead_of_being_created(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem()
    missing = str(tmp_path / "never-created")
    f = FsCheckpointStreamFactory(fs, missing, missing, 10, 10)
    stream = f.create_checkpoint_state_output_stream()
    with pytest.raises(StorageError, match="Could not open output stream for state backend") as err:
        stream.write(b"x" * 100)
    assert isinstance(err.value.__cause__, FileNotFoundError)
    assert fs.calls["open_output"] == 10
    assert fs.calls["mkdirs"] == 0
    assert not os.path.exists(missing)


def test_name_collisions_are_retried(dirs) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem(fail_creates=9)
    stream = factory(dirs, 0, 0, fs).create_checkpoint_state_output_stream()
    stream.write(b"x")
    handle = stream.close_and_get_handle()
    assert isinstance(handle, FileStateHandle) and handle.read_all() == b"x"
    assert fs.calls["open_output"] == 10


def test_ten_collisions_give_up(dirs) -> None:  # type: ignore[no-untyped-def]
    fs = CountingFileSystem(fail_creates=10)
    stream = factory(dirs, 0, 0, fs).create_checkpoint_state_output_stream()
    with pytest.raises(StorageError, match="Could not open output stream for state backend"):
        stream.write(b"x")
    assert fs.calls["open_output"] == 10


# ---- closing ----------------------------------------------------------------------------


def test_close_without_handle_deletes_the_file(dirs) -> None:  # type: ignore[no-untyped-def]
    stream = factory(dirs, 10, 10).create_checkpoint_state_output_stream()
    stream.write(b"x" * 100)
    assert len(os.listdir(dirs[0])) == 1
    stream.close()
    assert os.listdir(dirs[0]) == []
    assert stream.closed
    stream.close()  # idempotent


def test_context_manager_discards_on_error(dirs) -> None:  # type: ignore[no-untyped-def]
    with (
        pytest.raises(RuntimeError),
        factory(dirs, 10, 10).create_checkpoint_state_output_stream() as s,
    ):
        s.write(b"x" * 100)
        raise RuntimeError("task failed")
    assert os.listdir(dirs[0]) == []


def test_handle_after_close_or_twice_errors(dirs) -> None:  # type: ignore[no-untyped-def]
    for size in (5, 500):
        stream = factory(dirs, 10, 10).create_checkpoint_state_output_stream()
        stream.write(b"x" * size)
        assert stream.close_and_get_handle() is not None
        with pytest.raises(StorageError, match=r"Stream has already been closed and discarded\."):
            stream.close_and_get_handle()
    stream = factory(dirs, 10, 10).create_checkpoint_state_output_stream()
    stream.write(b"x")
    stream.close()
    with pytest.raises(StorageError, match=r"Stream has already been closed and discarded\."):
        stream.close_and_get_handle()


def test_write_after_close_errors(dirs) -> None:  # type: ignore[no-untyped-def]
    stream = factory(dirs).create_checkpoint_state_output_stream()
    stream.close()
    with pytest.raises(StorageError):
        stream.write(b"x")


def test_failure_while_closing_deletes_file_and_reports(dirs) -> None:  # type: ignore[no-untyped-def]
    stream = factory(dirs, 10, 10).create_checkpoint_state_output_stream()
    stream.write(b"x" * 100)
    out = stream._out
    assert out is not None

    def broken_close() -> None:
        raise OSError("disk full")

    out.close = broken_close  # type: ignore[method-assign]
    with pytest.raises(StorageError, match="Could not flush to file and close"):
        stream.close_and_get_handle()
    assert os.listdir(dirs[0]) == []
    assert stream.closed


# ---- entropy ----------------------------------------------------------------------------


def test_entropy_injection_makes_handles_absolute() -> None:
    fs = FsspecFileSystem("memory")
    fs.entropy_key = "_entropy_"
    fs.entropy_length = 4
    base = f"memory://ent-{uuid.uuid4().hex}/_entropy_/cp/job/chk-3"
    f = FsCheckpointStreamFactory(fs, base, base.replace("chk-3", "shared"), 10, 10)
    assert f.entropy_injecting
    stream = f.create_checkpoint_state_output_stream(EXCLUSIVE)
    stream.write(b"z" * 64)
    handle = stream.close_and_get_handle()
    assert type(handle) is FileStateHandle
    prefix = base.split("/_entropy_/")[0]
    assert re.fullmatch(re.escape(prefix) + r"/[A-Za-z0-9]{4}/cp/job/chk-3/" + UUID_RE, handle.path)
    assert fs.read_bytes(handle.path) == b"z" * 64
    # inline state is unaffected by entropy
    small = f.create_checkpoint_state_output_stream()
    small.write(b"s")
    assert isinstance(small.close_and_get_handle(), ByteStreamStateHandle)


def test_no_entropy_when_path_lacks_the_key() -> None:
    fs = FsspecFileSystem("memory")
    fs.entropy_key = "_entropy_"
    base = f"memory://ent-{uuid.uuid4().hex}/cp/chk-1"
    f = FsCheckpointStreamFactory(fs, base, base, 10, 10)
    assert not f.entropy_injecting
    s = f.create_checkpoint_state_output_stream()
    s.write(b"q" * 20)
    assert isinstance(s.close_and_get_handle(), RelativeFileStateHandle)


def test_repr_is_flinks(dirs) -> None:  # type: ignore[no-untyped-def]
    assert repr(factory(dirs)) == f"File Stream Factory @ {dirs[0]}"
