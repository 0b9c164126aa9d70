"""``SstUploadLedger``: which SST files incremental checkpoints uploaded, and which
checkpoint was confirmed, kept in a sidecar file next to the local database.

A keyed backend object lives for one Spark task, while confirmations of a checkpoint arrive
later (often in another task, possibly another Python worker): the ledger is re-read before
every change and written atomically, under a file lock (``fcntl``) plus a process lock, so
an upload thread and a task thread never lose each other's update.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from sparkpoint.checkpoint.handles import StreamStateHandle

__all__ = ["SstUploadLedger"]

_PROCESS_LOCK = threading.Lock()


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Exclusive access to the ledger at ``path`` across threads and processes."""
    with _PROCESS_LOCK, open(f"{path}.lock", "a+b") as lock_file:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)


@dataclass
class SstUploadLedger:
    """SST files uploaded per checkpoint and the last confirmed one, persisted as a sidecar.

    ``backend_identifier`` names the local database instance; it changes whenever the
    database is replaced (restore, wipe), which also empties the ledger.
    """

    path: str
    backend_identifier: str = field(default_factory=lambda: uuid.uuid4().hex)
    uploaded: dict[int, dict[str, StreamStateHandle]] = field(default_factory=dict)
    last_completed_checkpoint_id: int = -1

    @classmethod
    def load(cls, path: str) -> SstUploadLedger:
        """The ledger at ``path``, or a fresh one if absent or unreadable."""
        try:
            with open(path, "rb") as f:
                state = pickle.load(f)
            return cls(path, state["id"], state["uploaded"], state["last"])
        except (OSError, pickle.UnpicklingError, KeyError, EOFError, TypeError):
            return cls(path)

    def save(self) -> None:
        """Atomically persist the ledger next to the database."""
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        state = {
            "id": self.backend_identifier,
            "uploaded": self.uploaded,
            "last": self.last_completed_checkpoint_id,
        }
        with open(tmp, "wb") as f:
            pickle.dump(state, f)
        os.replace(tmp, self.path)

    def reset(
        self, confirmed: dict[str, StreamStateHandle] | None = None, checkpoint_id: int = -1
    ) -> None:
        """Start over for a new database instance (optionally with restored confirmed SSTs)."""
        with _locked(self.path):
            self.backend_identifier = uuid.uuid4().hex
            self.uploaded = {checkpoint_id: dict(confirmed)} if confirmed else {}
            self.last_completed_checkpoint_id = checkpoint_id if confirmed else -1
            self.save()

    def _reload(self) -> bool:
        """Re-read the sidecar (another task's backend instance may have changed it); False
        when the database was replaced since this ledger was loaded (then it is stale)."""
        if not os.path.exists(self.path):
            return True
        fresh = SstUploadLedger.load(self.path)
        if fresh.backend_identifier != self.backend_identifier:
            return False
        self.uploaded = fresh.uploaded
        self.last_completed_checkpoint_id = fresh.last_completed_checkpoint_id
        return True

    def confirmed(self) -> dict[str, StreamStateHandle]:
        """SSTs uploaded by the last completed checkpoint (safe to reference)."""
        with _locked(self.path):
            if not self._reload():
                return {}
            return dict(self.uploaded.get(self.last_completed_checkpoint_id, {}))

    def record(
        self, checkpoint_id: int, files: dict[str, StreamStateHandle], full: bool = False
    ) -> None:
        """Remember the SSTs checkpoint ``checkpoint_id`` references. After a ``full``
        checkpoint nothing older is referenced again, even before it is confirmed."""
        with _locked(self.path):
            if not self._reload():
                return
            if full:
                self.uploaded = {k: v for k, v in self.uploaded.items() if k > checkpoint_id}
                self.last_completed_checkpoint_id = -1
            self.uploaded[checkpoint_id] = files
            self.save()

    def complete(self, checkpoint_id: int) -> None:
        """Mark ``checkpoint_id`` confirmed; forget older checkpoints' lists."""
        with _locked(self.path):
            if not self._reload() or checkpoint_id not in self.uploaded:
                return
            if checkpoint_id < self.last_completed_checkpoint_id:
                return
            self.last_completed_checkpoint_id = checkpoint_id
            self.uploaded = {k: v for k, v in self.uploaded.items() if k >= checkpoint_id}
            self.save()

    def abort(self, checkpoint_id: int) -> None:
        """Forget an aborted checkpoint's list."""
        with _locked(self.path):
            if self._reload() and self.uploaded.pop(checkpoint_id, None) is not None:
                self.save()
