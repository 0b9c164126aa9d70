"""The executor side of asynchronous snapshot uploads (``runtime/task/async_upload.py``), in
plain Python: records of running, finished, failed and lost uploads, cancellation, and the
files of uploads whose checkpoint was aborted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import FileStateHandle
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.fs.registry import get_filesystem
from sparkpoint.runtime.protocol import UploadState
from sparkpoint.runtime.task.async_upload import SubtaskUploads, end_job_uploads


def _factory(tmp_path: Path) -> CheckpointStreamFactory:
    base = tmp_path / "chk-7"
    base.mkdir(exist_ok=True)
    (tmp_path / "shared").mkdir(exist_ok=True)
    return FsCheckpointStreamFactory(
        get_filesystem(base.as_uri()),
        base.as_uri(),
        (tmp_path / "shared").as_uri(),
        file_state_size_threshold=0,
    )


def _uploads(tmp_path: Path) -> SubtaskUploads:
    return SubtaskUploads(str(tmp_path / "local" / "op" / "0.uploads"), "op", 0)


def _writer(factory: CheckpointStreamFactory, chunks: int, gate: threading.Event | None = None):
    def upload() -> FileStateHandle:
        with factory.create_checkpoint_state_output_stream() as out:
            for _ in range(chunks):
                if gate is not None:
                    gate.wait(5)
                out.write(b"x" * 1024)
                time.sleep(0.01)
            handle = out.close_and_get_handle()
        assert isinstance(handle, FileStateHandle), handle
        return handle

    return upload


def _exists(handle: FileStateHandle) -> bool:
    return os.path.exists(handle.path.removeprefix("file://"))


def _files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "chk-7").iterdir())


def test_a_finished_upload_is_reported_until_settled(tmp_path: Path) -> None:
    uploads = _uploads(tmp_path)
    gate = threading.Event()
    thread = uploads.start(7, _writer(uploads.stream_factory(7, _factory(tmp_path)), 3, gate))
    [running] = uploads.statuses({7})
    assert running.state == UploadState.RUNNING and running.checkpoint_id == 7
    gate.set()
    thread.join(10)
    [done] = uploads.statuses({7})
    assert done.state == UploadState.DONE and done.state_size == 3 * 1024
    assert isinstance(done.handle, FileStateHandle) and _exists(done.handle)
    assert uploads.statuses({7}) == [done]  # reported again until the driver settles it
    assert uploads.statuses({8}) == []
    assert uploads.settle({7}, ()) == 0 and uploads.statuses({7}) == [done]
    uploads.settle((), ())  # completed: the record goes, the file stays (it is referenced)
    assert os.listdir(uploads.directory) == [] and _exists(done.handle)


def test_a_failed_upload_reports_its_error(tmp_path: Path) -> None:
    uploads = _uploads(tmp_path)

    def upload() -> None:
        raise OSError("disk on fire")

    uploads.start(7, upload).join(10)
    [failed] = uploads.statuses({7})
    assert failed.state == UploadState.FAILED and "disk on fire" in failed.detail


def test_an_aborted_checkpoint_cancels_its_running_upload_and_leaves_no_file(
    tmp_path: Path,
) -> None:
    uploads = _uploads(tmp_path)
    gate = threading.Event()
    thread = uploads.start(7, _writer(uploads.stream_factory(7, _factory(tmp_path)), 50, gate))
    gate.set()
    time.sleep(0.1)
    assert uploads.settle((), {7}) == 1  # still running: told to stop
    thread.join(10)
    assert not thread.is_alive()
    assert uploads.statuses({7}) == []  # cancelled uploads leave no done/failed record
    assert uploads.settle((), {7}) == 0
    assert _files(tmp_path) == [] and os.listdir(uploads.directory) == []


def test_an_upload_that_ends_after_its_abort_deletes_its_files(tmp_path: Path) -> None:
    uploads = _uploads(tmp_path)
    uploads.start(7, _writer(uploads.stream_factory(7, _factory(tmp_path)), 2)).join(10)
    [done] = uploads.statuses({7})
    assert _exists(done.handle)
    uploads.settle((), {7})
    assert not _exists(done.handle) and os.listdir(uploads.directory) == []


def test_an_upload_whose_worker_died_is_lost(tmp_path: Path) -> None:
    uploads = _uploads(tmp_path)
    os.makedirs(uploads.directory)
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(child.stdout)
    Path(uploads.directory, "7.running").write_text(f"{pid} 12345")
    [lost] = uploads.statuses({7})
    assert lost.state == UploadState.LOST and "gone" in lost.detail
    assert uploads.settle((), ()) == 0 and os.listdir(uploads.directory) == []


def test_the_end_of_a_job_stops_every_upload_and_deletes_aborted_ones(tmp_path: Path) -> None:
    job_dir = tmp_path / "local"
    first, second = _uploads(tmp_path), SubtaskUploads(str(job_dir / "op" / "1.uploads"), "op", 1)
    factory = _factory(tmp_path)
    slow = first.start(7, _writer(first.stream_factory(7, factory), 500))
    second.start(7, _writer(second.stream_factory(7, factory), 1)).join(10)
    assert end_job_uploads(str(job_dir), {7}, wait_s=10) == 0
    slow.join(10)
    assert not slow.is_alive() and _files(tmp_path) == []


@pytest.mark.parametrize("pending", [set(), {7}])
def test_records_of_other_checkpoints_are_not_reported(tmp_path: Path, pending: set[int]) -> None:
    uploads = _uploads(tmp_path)
    uploads.start(6, _writer(uploads.stream_factory(6, _factory(tmp_path)), 1)).join(10)
    assert uploads.statuses(pending) == []
