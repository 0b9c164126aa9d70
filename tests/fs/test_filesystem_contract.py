"""One contract for every FileSystem: local paths, file:// URIs, memory:// and S3 (moto)."""

from __future__ import annotations

import pickle
import uuid

import pytest

from sparkpoint.fs import FileInfo, FileSystem, get_filesystem

KINDS = ["plain", "file-uri", "memory", pytest.param("s3", marks=pytest.mark.s3)]


@pytest.fixture(params=KINDS)
def base(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A fresh, empty directory URI of the given kind."""
    if request.param == "plain":
        return str(tmp_path)
    if request.param == "file-uri":
        return tmp_path.as_uri()
    if request.param == "memory":
        return f"memory://contract-{uuid.uuid4().hex}"
    from tests.fixtures.s3 import ensure_s3_configured

    server = request.getfixturevalue("s3_server")
    ensure_s3_configured(server)
    return server.unique_prefix()


@pytest.fixture
def fs(base: str) -> FileSystem:
    """The filesystem serving ``base`` (its directory created)."""
    filesystem = get_filesystem(base)
    filesystem.mkdirs(base)
    return filesystem


def test_write_atomic_then_read_back(fs: FileSystem, base: str) -> None:
    path = f"{base}/m"
    fs.write_atomic(path, b"metadata-bytes")
    assert fs.read_bytes(path) == b"metadata-bytes"
    assert fs.size(path) == 14
    assert fs.exists(path)
    assert not fs.is_dir(path)


def test_write_atomic_refuses_to_overwrite(fs: FileSystem, base: str) -> None:
    path = f"{base}/m"
    fs.write_atomic(path, b"first")
    with pytest.raises(FileExistsError):
        fs.write_atomic(path, b"second")
    assert fs.read_bytes(path) == b"first"


def test_write_atomic_overwrite_replaces(fs: FileSystem, base: str) -> None:
    path = f"{base}/m"
    fs.write_atomic(path, b"first")
    fs.write_atomic(path, b"second!", overwrite=True)
    assert fs.read_bytes(path) == b"second!"


def test_write_atomic_leaves_no_temporary_files(fs: FileSystem, base: str) -> None:
    fs.write_atomic(f"{base}/a", b"1")
    with pytest.raises(FileExistsError):
        fs.write_atomic(f"{base}/a", b"2")
    assert [i.path for i in fs.list(base)] == [f"{base}/a"]


def test_open_output_no_overwrite(fs: FileSystem, base: str) -> None:
    path = f"{base}/f"
    with fs.open_output(path) as out:
        out.write(b"abc")
    with pytest.raises(FileExistsError), fs.open_output(path) as out:
        out.write(b"zzz")
    assert fs.read_bytes(path) == b"abc"


def test_open_output_overwrite(fs: FileSystem, base: str) -> None:
    path = f"{base}/f"
    with fs.open_output(path) as out:
        out.write(b"abc")
    with fs.open_output(path, overwrite=True) as out:
        out.write(b"xy")
    assert fs.read_bytes(path) == b"xy"


def test_open_input_is_seekable(fs: FileSystem, base: str) -> None:
    path = f"{base}/f"
    fs.write_atomic(path, bytes(range(100)))
    with fs.open_input(path) as stream:
        stream.seek(40)
        assert stream.read(5) == bytes([40, 41, 42, 43, 44])


def test_missing_file_errors(fs: FileSystem, base: str) -> None:
    with pytest.raises(FileNotFoundError):
        fs.read_bytes(f"{base}/missing")
    with pytest.raises(FileNotFoundError):
        fs.open_input(f"{base}/missing").read()
    with pytest.raises(FileNotFoundError):
        fs.size(f"{base}/missing")
    assert not fs.exists(f"{base}/missing")


def test_list_flat_and_recursive(fs: FileSystem, base: str) -> None:
    fs.mkdirs(f"{base}/d")
    fs.write_atomic(f"{base}/d/x", b"12")
    fs.write_atomic(f"{base}/top", b"1")
    flat = fs.list(base)
    assert flat == [FileInfo(f"{base}/d", 0, True), FileInfo(f"{base}/top", 1, False)]
    deep = [i for i in fs.list(base, recursive=True) if not i.is_dir]
    assert deep == [FileInfo(f"{base}/d/x", 2, False), FileInfo(f"{base}/top", 1, False)]
    assert fs.list(f"{base}/absent") == []


def test_delete_file_dir_and_absent(fs: FileSystem, base: str) -> None:
    fs.mkdirs(f"{base}/d/e")
    fs.write_atomic(f"{base}/d/e/x", b"1")
    fs.write_atomic(f"{base}/f", b"1")
    fs.delete(f"{base}/f")
    assert not fs.exists(f"{base}/f")
    with pytest.raises(OSError):
        fs.delete(f"{base}/d")
    fs.delete(f"{base}/d", recursive=True)
    assert not fs.exists(f"{base}/d/e/x")
    assert not fs.exists(f"{base}/d")
    fs.delete(f"{base}/never-existed")
    fs.delete(f"{base}/never-existed", recursive=True)


def test_rename(fs: FileSystem, base: str) -> None:
    fs.write_atomic(f"{base}/a", b"data")
    fs.rename(f"{base}/a", f"{base}/b")
    assert not fs.exists(f"{base}/a")
    assert fs.read_bytes(f"{base}/b") == b"data"


def test_is_dir_after_content(fs: FileSystem, base: str) -> None:
    fs.mkdirs(f"{base}/dir")
    fs.write_atomic(f"{base}/dir/x", b"1")
    assert fs.is_dir(f"{base}/dir")
    assert fs.exists(f"{base}/dir")
    with pytest.raises(IsADirectoryError):
        fs.size(f"{base}/dir")


def test_pickled_filesystem_still_works(fs: FileSystem, base: str) -> None:
    fs.write_atomic(f"{base}/p", b"pickled")
    copy = pickle.loads(pickle.dumps(fs))
    assert copy.read_bytes(f"{base}/p") == b"pickled"
    assert type(copy) is type(fs)


def test_path_helpers(fs: FileSystem, base: str) -> None:
    assert fs.join(base, "a", "b") == f"{base}/a/b"
    assert fs.parent(f"{base}/a/b") == f"{base}/a"
    assert fs.name(f"{base}/a/b") == "b"
