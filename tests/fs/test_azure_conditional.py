"""Azure Blob creates through adlfs against Azurite (Microsoft's emulator) on 127.0.0.1.

adlfs commits a blob with ``If-None-Match: *``; Azurite refuses it when the blob exists.
Needs the ``azure`` and ``test`` extras and Azurite from npm: ``.ci/run`` installs it and
sets ``SPARKPOINT_AZURITE`` to its ``azurite-blob`` executable.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import types
import uuid
from collections.abc import Iterator

import pytest

from sparkpoint.checkpoint import fs_streams
from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.errors import StorageError
from sparkpoint.fs.registry import configure, create_filesystem, get_filesystem, get_options

pytest.importorskip("adlfs")
AZURITE = os.environ.get("SPARKPOINT_AZURITE") or shutil.which("azurite-blob")
if AZURITE is None:
    pytest.skip(
        "Azurite is not installed (npm install azurite; .ci/run installs it)",
        allow_module_level=True,
    )

CONTAINER = "sparkpoint-azure"
JOB = "abcdefabcdefabcdefabcdefabcdefab"
# Azurite's documented development account (public, emulator only).
_ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@pytest.fixture(scope="module")
def azure_options() -> Iterator[dict[str, str]]:
    """Azurite's blob service on a free port (in memory), with the test container."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert AZURITE is not None
    proc = subprocess.Popen(
        [
            AZURITE,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Azurite did not start on port {port}") from None
                time.sleep(0.1)
        connection = (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
        )
        options = {"abfs.connection_string": connection}
        create_filesystem("abfs://x", options, env={}).fsspec.mkdir(CONTAINER)  # type: ignore[attr-defined]
        yield options
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # Azurite may wait for open connections
            proc.kill()
            proc.wait()


def test_two_open_writers_only_first_close_wins(azure_options: dict[str, str]) -> None:
    fs = create_filesystem("abfs://c/k", azure_options, env={})
    assert fs.atomic_create
    path = f"abfs://{CONTAINER}/{uuid.uuid4().hex}/obj"
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


def test_discarded_stream_publishes_nothing(azure_options: dict[str, str]) -> None:
    fs = create_filesystem("abfs://c/k", azure_options, env={})
    path = f"abfs://{CONTAINER}/{uuid.uuid4().hex}/obj"
    stream = fs.open_output(path)
    stream.write(b"never visible")
    fs.discard_output(stream, path)
    del stream  # a dropped fsspec file would commit on collection if not discarded
    assert not fs.exists(path)


def test_two_attempts_of_one_state_file_and_two_metadata_writers(
    azure_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = get_options()
    configure({**saved, **azure_options})  # handles resolve their file system by path
    try:
        base = f"abfs://{CONTAINER}/{uuid.uuid4().hex}"
        access = FsCheckpointStorageAccess(
            base, None, JOB, file_size_threshold=100, write_buffer_size=64
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
        assert get_filesystem(base).read_bytes(location.metadata_file_path) == b"A"
    finally:
        configure(saved)
