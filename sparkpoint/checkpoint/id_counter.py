"""``CheckpointIDCounter``: hands out increasing checkpoint ids, starting at 1."""

from __future__ import annotations

import threading

__all__ = ["INITIAL_CHECKPOINT_ID", "CheckpointIDCounter"]

INITIAL_CHECKPOINT_ID = 1
"""The id of the first checkpoint of a job (Flink's ``INITIAL_CHECKPOINT_ID``)."""


class CheckpointIDCounter:
    """A thread-safe counter of checkpoint ids (Flink's StandaloneCheckpointIDCounter).

    On restore the coordinator sets it past the restored checkpoint so ids keep increasing.
    """

    def __init__(self, initial: int = INITIAL_CHECKPOINT_ID) -> None:
        if initial < 0:
            raise ValueError(f"Checkpoint ids start at a non-negative value, got {initial}")
        self._next = initial
        self._lock = threading.Lock()

    def get_and_increment(self) -> int:
        """The next id; the counter moves on by one."""
        with self._lock:
            value = self._next
            self._next += 1
            return value

    def get(self) -> int:
        """The id the next ``get_and_increment`` returns."""
        with self._lock:
            return self._next

    def set_count(self, new_count: int) -> None:
        """Make ``new_count`` the next id (used when restoring: restored id + 1)."""
        if new_count < 0:
            raise ValueError(f"Checkpoint id counter must not be negative, got {new_count}")
        with self._lock:
            self._next = new_count

    def __repr__(self) -> str:
        return f"CheckpointIDCounter(next={self._next})"
