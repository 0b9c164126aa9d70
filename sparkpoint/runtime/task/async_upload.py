"""Asynchronous snapshot uploads on an executor.

A task takes a snapshot's synchronous part (copy-on-write view, RocksDB hard-link
checkpoint) at the end of its epoch and hands the upload to a background thread of its
Python worker, which outlives the task (Spark reuses the worker). The thread records how
the upload ended in the subtask's upload directory on the executor's local disk, since
the subtask's next task may run in another Python worker of the same executor:

    <cid>.running   pid and start time of the uploading worker (until the thread ends)
    <cid>.done      the pickled handle and state size
    <cid>.failed    the error
    <cid>.cancel    the driver aborted the checkpoint: stop uploading

Every later task of the subtask reports these records (``UploadStatus``) until the driver
no longer waits for the checkpoint; then the task removes them (``settle``), deleting what
an upload finished after its checkpoint was aborted had written.
"""

from __future__ import annotations

import glob
import logging
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Collection

from sparkpoint.checkpoint.handles import (
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    PlaceholderStreamStateHandle,
    StateObject,
    StreamStateHandle,
    discard_quietly,
)
from sparkpoint.checkpoint.streams import (
    CheckpointedStateScope,
    CheckpointStateOutputStream,
    CheckpointStreamFactory,
    ForwardingOutputStream,
)
from sparkpoint.runtime.protocol import UploadState, UploadStatus
from sparkpoint.runtime.task.executor import process_alive, process_start_time

__all__ = [
    "CancellableStreamFactory",
    "SubtaskUploads",
    "UploadCancelled",
    "end_job_uploads",
    "uploaded_files",
    "worker_is_reused",
]

_LOG = logging.getLogger("sparkpoint.task")
_CANCEL_CHECK_S = 0.05  # how often a running upload looks for its cancel record


class UploadCancelled(Exception):
    """The driver aborted the checkpoint this upload belonged to."""


def worker_is_reused() -> bool:
    """Whether this Python worker outlives its task (``spark.python.worker.reuse``): only
    then can an upload go on after the task has ended."""
    return bool(os.environ.get("SPARK_REUSE_WORKER"))


class _CancellableStream(ForwardingOutputStream):
    """A checkpoint stream that stops (and discards what it wrote) once cancelled."""

    def __init__(self, inner: CheckpointStateOutputStream, cancelled: Callable[[], bool]) -> None:
        super().__init__(inner)
        self._cancelled = cancelled

    def _check(self) -> None:
        if self._cancelled():
            self._inner.close()
            raise UploadCancelled("checkpoint aborted while uploading")

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._check()
        return self._inner.write(data)

    def close_and_get_handle(self) -> StreamStateHandle | None:
        self._check()
        return self._inner.close_and_get_handle()


class CancellableStreamFactory(CheckpointStreamFactory):
    """Wraps a stream factory so that every stream it creates stops once ``cancelled()``."""

    def __init__(self, inner: CheckpointStreamFactory, cancelled: Callable[[], bool]) -> None:
        self._inner = inner
        self._cancelled = cancelled

    def create_checkpoint_state_output_stream(
        self, scope: CheckpointedStateScope = CheckpointedStateScope.EXCLUSIVE
    ) -> CheckpointStateOutputStream:
        return _CancellableStream(
            self._inner.create_checkpoint_state_output_stream(scope), self._cancelled
        )


def _write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def uploaded_files(handle: KeyedStateHandle) -> list[StateObject]:
    """What an upload wrote itself: the handle, plus for incremental handles the shared
    files it uploaded (placeholders stand for files of confirmed checkpoints)."""
    owned: list[StateObject] = [handle]
    if isinstance(handle, IncrementalRemoteKeyedStateHandle):
        owned.extend(
            item.handle
            for item in handle.shared_state
            if not isinstance(item.handle, PlaceholderStreamStateHandle)
        )
    return owned


class SubtaskUploads:
    """The asynchronous uploads of one keyed subtask on this executor (see module doc)."""

    def __init__(self, directory: str, operator_id: str, subtask: int) -> None:
        self.directory = directory
        self.operator_id = operator_id
        self.subtask = subtask

    def _path(self, checkpoint_id: int, kind: str) -> str:
        return os.path.join(self.directory, f"{checkpoint_id}.{kind}")

    # -- starting --------------------------------------------------------------------------
    def stream_factory(
        self, checkpoint_id: int, factory: CheckpointStreamFactory
    ) -> CheckpointStreamFactory:
        """``factory`` wrapped so that the upload of ``checkpoint_id`` stops when cancelled."""
        cancel = self._path(checkpoint_id, "cancel")
        last = [0.0]

        def cancelled() -> bool:
            now = time.monotonic()
            if now - last[0] < _CANCEL_CHECK_S:
                return False
            last[0] = now
            return os.path.exists(cancel)

        return CancellableStreamFactory(factory, cancelled)

    def start(
        self,
        checkpoint_id: int,
        upload: Callable[[], KeyedStateHandle | None],
        before: Callable[[], None] | None = None,
    ) -> threading.Thread:
        """Run ``upload`` (the snapshot's asynchronous part) in a background thread that
        records its outcome; ``before`` runs first in that thread (fault injection)."""
        os.makedirs(self.directory, exist_ok=True)
        pid = os.getpid()
        running = self._path(checkpoint_id, "running")
        _write_atomic(running, f"{pid} {process_start_time(pid) or 0}".encode())
        for stale in ("done", "failed", "cancel"):  # an earlier attempt of this epoch
            _remove(self._path(checkpoint_id, stale))

        def run() -> None:
            try:
                if before is not None:
                    before()
                handle = upload()
                size = handle.state_size if handle is not None else 0
                _write_atomic(
                    self._path(checkpoint_id, "done"), pickle.dumps((handle, size), protocol=5)
                )
            except UploadCancelled:
                _LOG.info(
                    "Upload of %s#%d for checkpoint %d cancelled",
                    self.operator_id,
                    self.subtask,
                    checkpoint_id,
                )
            except BaseException as exc:  # recorded for the driver, which aborts
                _LOG.warning(
                    "Upload of %s#%d for checkpoint %d failed: %r",
                    self.operator_id,
                    self.subtask,
                    checkpoint_id,
                    exc,
                    exc_info=True,
                )
                try:
                    _write_atomic(self._path(checkpoint_id, "failed"), repr(exc).encode())
                except OSError:
                    pass  # the directory is gone (job ended): nobody waits any more
            finally:
                _remove(running)

        thread = threading.Thread(
            target=run,
            name=f"sparkpoint-upload-{self.operator_id}-{self.subtask}-{checkpoint_id}",
            daemon=True,
        )
        thread.start()
        return thread

    # -- what later tasks see --------------------------------------------------------------
    def _records(self) -> dict[int, set[str]]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return {}
        found: dict[int, set[str]] = {}
        for name in names:
            cid, _, kind = name.partition(".")
            if cid.isdigit() and kind in ("running", "done", "failed", "cancel"):
                found.setdefault(int(cid), set()).add(kind)
        return found

    def _running_alive(self, checkpoint_id: int) -> bool:
        try:
            with open(self._path(checkpoint_id, "running"), encoding="ascii") as f:
                pid, start = (int(x) for x in f.read().split())
        except (OSError, ValueError):
            return False
        return process_alive(pid, start)

    def status(self, checkpoint_id: int, kinds: Collection[str]) -> UploadStatus | None:
        """The status of the upload of ``checkpoint_id`` (None: no record of it)."""
        op, sub = self.operator_id, self.subtask
        if "done" in kinds:
            try:
                with open(self._path(checkpoint_id, "done"), "rb") as f:
                    handle, size = pickle.load(f)
                return UploadStatus(op, sub, checkpoint_id, UploadState.DONE, handle, size)
            except (OSError, pickle.UnpicklingError, EOFError, ValueError) as exc:
                return UploadStatus(
                    op,
                    sub,
                    checkpoint_id,
                    UploadState.FAILED,
                    detail=f"unreadable upload record: {exc!r}",
                )
        if "failed" in kinds:
            try:
                with open(self._path(checkpoint_id, "failed"), encoding="utf-8") as f:
                    detail = f.read()
            except OSError as exc:
                detail = repr(exc)
            return UploadStatus(op, sub, checkpoint_id, UploadState.FAILED, detail=detail)
        if "running" in kinds:
            if self._running_alive(checkpoint_id):
                return UploadStatus(op, sub, checkpoint_id, UploadState.RUNNING)
            # Finished between the listing and now, or its worker died.
            if os.path.exists(self._path(checkpoint_id, "done")):
                return self.status(checkpoint_id, ("done",))
            return UploadStatus(
                op,
                sub,
                checkpoint_id,
                UploadState.LOST,
                detail="the Python worker uploading it is gone",
            )
        return None

    def statuses(self, pending: Collection[int]) -> list[UploadStatus]:
        """The status of every upload record of a checkpoint in ``pending``."""
        out = []
        for cid, kinds in sorted(self._records().items()):
            if cid in pending:
                found = self.status(cid, kinds)
                if found is not None:
                    out.append(found)
        return out

    def settle(self, pending: Collection[int], aborted: Collection[int]) -> int:
        """Forget uploads the driver no longer waits for: cancel running ones, delete
        records, and delete the files of uploads whose checkpoint was aborted. Returns how
        many are still running."""
        running = 0
        for cid, kinds in self._records().items():
            if cid in pending:
                continue
            if "running" in kinds and self._running_alive(cid):
                running += 1
                if "cancel" not in kinds:
                    _write_atomic(self._path(cid, "cancel"), b"")
                continue
            if "done" in kinds and cid in aborted:
                found = self.status(cid, ("done",))
                if found is not None and found.handle is not None:
                    discard_quietly(uploaded_files(found.handle))
            for kind in kinds:
                _remove(self._path(cid, kind))
        return running


def end_job_uploads(job_dir: str, aborted: Collection[int], wait_s: float = 30.0) -> int:
    """At the end of a job, on one executor: cancel the job's running uploads, wait (at most
    ``wait_s``) until they have stopped, and delete what those of aborted checkpoints
    wrote. Returns how many were still running when the wait ended."""
    uploads = [
        SubtaskUploads(d, os.path.basename(os.path.dirname(d)), 0)
        for kind in ("*.uploads", "*.materializations")
        for d in glob.glob(os.path.join(glob.escape(job_dir), "*", kind))
    ]
    deadline = time.monotonic() + wait_s
    while True:
        running = sum(u.settle((), aborted) for u in uploads)
        if running == 0 or time.monotonic() >= deadline:
            return running
        time.sleep(_CANCEL_CHECK_S)
