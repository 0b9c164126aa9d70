"""Which file systems create atomically, and checkpoint storage refusing those that do not."""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import uuid

import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.mem_storage import MemCheckpointStorageAccess
from sparkpoint.fs.atomic import (
    ALLOW_NON_ATOMIC_CREATE,
    NonAtomicCreateError,
    require_atomic_create,
)
from sparkpoint.fs.fsspec_fs import FsspecFileSystem
from sparkpoint.fs.registry import configure, create_filesystem, get_options

JOB = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def restore_options():  # type: ignore[no-untyped-def]
    saved = get_options()
    yield
    configure(saved)


def test_schemes_that_create_atomically(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for path in (str(tmp_path), tmp_path.as_uri(), "s3://b/k", "s3a://b/k", "memory://x"):
        assert create_filesystem(path, {}, env={}).atomic_create, path
    for path in ("abfs://c/k", "az://c/k"):
        assert create_filesystem(path, {}, env={}).atomic_create, path
    gcs = create_filesystem("gs://b/k", {}, env={})
    assert gcs.atomic_create == (importlib.util.find_spec("gcsfs") is not None)


def test_hdfs_is_refused_with_scheme_reason_and_fix() -> None:
    fs = create_filesystem("hdfs://namenode:8020/ckpt", {}, env={})
    with pytest.raises(NonAtomicCreateError) as refused:
        FsCheckpointStorageAccess("hdfs://namenode:8020/ckpt", None, JOB, fs=fs)
    message = str(refused.value)
    assert message.startswith(
        "Checkpoint storage 'hdfs://namenode:8020/ckpt' is refused: the hdfs:// file system "
        "cannot create a file atomically (pyarrow's client has no create-if-absent, so a "
        "create checks for the file and then writes it)."
    )
    assert f"sparkpoint.fs.configure({{'{ALLOW_NON_ATOMIC_CREATE}': 'true'}})" in message
    assert "docs/storage.md" in message


def test_gcs_without_gcsfs_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # The test extras install gcsfs; a None entry in sys.modules is how Python marks a
    # module as not importable (find_spec returns None, import raises ImportError).
    monkeypatch.setitem(sys.modules, "gcsfs", None)
    fs = create_filesystem("gs://bucket/ckpt", {}, env={})
    with pytest.raises(NonAtomicCreateError, match=r"pip install 'sparkpoint\[gcs\]'"):
        FsCheckpointStreamFactory(fs, "gs://bucket/ckpt/chk-1", "gs://bucket/ckpt/shared")


def test_unknown_fsspec_scheme_is_refused_for_every_entry_point(restore_options) -> None:  # type: ignore[no-untyped-def]
    configure({})
    base = "ftp://host/ckpt"
    match = r"the ftp:// file system cannot create a file atomically \(sparkpoint knows no"
    with pytest.raises(NonAtomicCreateError, match=match):
        FsCheckpointStorageAccess(base, None, JOB)
    with pytest.raises(NonAtomicCreateError, match=match):
        MemCheckpointStorageAccess(JOB, base, None)
    with pytest.raises(NonAtomicCreateError, match=match):
        FsCheckpointStreamFactory(create_filesystem(base, {}, env={}), base, base)


def test_opt_in_accepts_with_one_warning(restore_options, caplog) -> None:  # type: ignore[no-untyped-def]
    configure({ALLOW_NON_ATOMIC_CREATE: "true"})
    hdfs = create_filesystem("hdfs://nn:1/ckpt", {}, env={})
    access = FsCheckpointStorageAccess("hdfs://nn:1/ckpt", None, JOB, fs=hdfs)
    assert access.fs is hdfs
    scheme = f"optin{uuid.uuid4().hex[:8]}"  # a scheme no other test has warned about
    fs = FsspecFileSystem(scheme)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sparkpoint.fs.atomic"):
        FsCheckpointStreamFactory(fs, f"{scheme}://b/chk-1", f"{scheme}://b/shared")
        FsCheckpointStreamFactory(fs, f"{scheme}://b/chk-2", f"{scheme}://b/shared")
    assert [r.getMessage() for r in caplog.records] == [
        f"Checkpoint storage on {scheme}:// creates files by checking, then writing "
        f"({fs.non_atomic_reason}); two writers of one file may both succeed "
        f"({ALLOW_NON_ATOMIC_CREATE}=true)."
    ]


def test_opt_in_value_must_be_a_boolean() -> None:
    fs = create_filesystem("hdfs://nn:1/ckpt", {}, env={})
    with pytest.raises(
        ValueError,
        match=rf"Could not parse value 'yes' for '{ALLOW_NON_ATOMIC_CREATE}': "
        "expected 'true' or 'false'",
    ):
        require_atomic_create(fs, "hdfs://nn:1/ckpt", {ALLOW_NON_ATOMIC_CREATE: "yes"})
    with pytest.raises(NonAtomicCreateError):
        require_atomic_create(fs, "hdfs://nn:1/ckpt", {ALLOW_NON_ATOMIC_CREATE: "false"})


def test_memory_create_race_has_one_winner() -> None:
    fs = create_filesystem("memory://x", {}, env={})
    path = f"memory://race-{uuid.uuid4().hex}/f"
    streams = [fs.open_output(path) for _ in range(8)]
    results: list[str] = []
    barrier = threading.Barrier(len(streams))

    def publish(i: int) -> None:
        streams[i].write(f"writer-{i}".encode())
        barrier.wait()
        try:
            streams[i].close()
            results.append(f"writer-{i}")
        except FileExistsError:
            results.append("lost")

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r != "lost"]
    assert len(winners) == 1 and len(results) == len(streams)
    assert fs.read_bytes(path) == winners[0].encode()


def test_memory_discarded_stream_publishes_nothing() -> None:
    fs = create_filesystem("memory://x", {}, env={})
    path = f"memory://discard-{uuid.uuid4().hex}/f"
    stream = fs.open_output(path)
    stream.write(b"never visible")
    fs.discard_output(stream, path)
    assert not fs.exists(path)
    fs.write_atomic(path, b"first")
    with pytest.raises(FileExistsError):
        fs.write_atomic(path, b"second")
    assert fs.read_bytes(path) == b"first"
