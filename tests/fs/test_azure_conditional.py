"""Azure Blob creates through adlfs against Azurite (Microsoft's emulator) on 127.0.0.1.

adlfs commits a blob with ``If-None-Match: *``; Azurite refuses it when the blob exists.
Needs the ``azure`` and ``test`` extras and Azurite from npm, installed on first use
(``tests/fixtures/system.py``; ``SPARKPOINT_AZURITE`` may name an ``azurite-blob`` instead).
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from sparkpoint.fs.registry import configure, create_filesystem, get_options
from tests.fixtures.create_races import (
    check_checkpoint_races,
    check_discard_publishes_nothing,
    check_first_close_wins,
)
from tests.fixtures.system import azurite_blob

pytest.importorskip("adlfs")

CONTAINER = "sparkpoint-azure"
# Azurite's documented development account (public, emulator only).
_ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@pytest.fixture(scope="module")
def azure_options() -> Iterator[dict[str, str]]:
    """Azurite's blob service on a free port (in memory), with the test container."""
    azurite = str(azurite_blob())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [
            azurite,
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
        proc.kill()  # in-memory emulator: nothing to flush, and SIGTERM waits for idle sockets
        proc.wait()


def test_two_open_writers_only_first_close_wins(azure_options: dict[str, str]) -> None:
    fs = create_filesystem("abfs://c/k", azure_options, env={})
    check_first_close_wins(fs, f"abfs://{CONTAINER}/{uuid.uuid4().hex}/obj")


def test_discarded_stream_publishes_nothing(azure_options: dict[str, str]) -> None:
    fs = create_filesystem("abfs://c/k", azure_options, env={})
    check_discard_publishes_nothing(fs, f"abfs://{CONTAINER}/{uuid.uuid4().hex}/obj")


def test_two_attempts_of_one_state_file_and_two_metadata_writers(
    azure_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = get_options()
    configure({**saved, **azure_options})  # handles resolve their file system by path
    try:
        check_checkpoint_races(f"abfs://{CONTAINER}/{uuid.uuid4().hex}", monkeypatch)
    finally:
        configure(saved)
