"""Local-disk specifics: no implicit mkdir, exclusive create, atomic publish in the target dir."""

from __future__ import annotations

import os
import threading

import pytest

from sparkpoint.fs.arrow import LocalFileSystem


def test_open_output_never_creates_parent_directories(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = LocalFileSystem()
    with pytest.raises(FileNotFoundError):
        fs.open_output(str(tmp_path / "missing" / "f"))
    assert not (tmp_path / "missing").exists()


def test_write_atomic_never_creates_parent_directories(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = LocalFileSystem()
    with pytest.raises(FileNotFoundError):
        fs.write_atomic(str(tmp_path / "missing" / "f"), b"x")
    assert not (tmp_path / "missing").exists()


def test_exclusive_create_has_one_winner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = LocalFileSystem()
    target = str(tmp_path / "contested")
    results: list[str] = []

    def attempt(i: int) -> None:
        try:
            fs.write_atomic(target, f"writer-{i}".encode())
            results.append(f"won-{i}")
        except FileExistsError:
            results.append("lost")

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r.startswith("won")]
    assert len(winners) == 1
    assert fs.read_bytes(target) == f"writer-{winners[0][4:]}".encode()
    assert os.listdir(tmp_path) == ["contested"]


def test_file_uri_forms_are_preserved(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = LocalFileSystem()
    (tmp_path / "x").write_bytes(b"1")
    uri = tmp_path.as_uri()
    assert [i.path for i in fs.list(uri)] == [f"{uri}/x"]
    assert fs.read_bytes(f"file:{tmp_path}/x") == b"1"
    assert fs.read_bytes(f"file://localhost{tmp_path}/x") == b"1"


def test_overwrite_publish_replaces_atomically(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = LocalFileSystem()
    target = str(tmp_path / "m")
    fs.write_atomic(target, b"a" * 1000)
    inode_before = os.stat(target).st_ino
    fs.write_atomic(target, b"b" * 10, overwrite=True)
    assert fs.read_bytes(target) == b"b" * 10
    assert os.stat(target).st_ino != inode_before


def test_publish_without_hard_links_falls_back_to_rename(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import errno as errno_module

    def no_links(src: str, dst: str) -> None:
        raise OSError(errno_module.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    fs = LocalFileSystem()
    target = str(tmp_path / "m")
    fs.write_atomic(target, b"one")
    with pytest.raises(FileExistsError):
        fs.write_atomic(target, b"two")
    assert fs.read_bytes(target) == b"one"
    assert os.listdir(tmp_path) == ["m"]
