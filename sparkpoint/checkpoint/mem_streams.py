"""Checkpoint streams into memory (JobManagerCheckpointStorage): state travels inline.

Each stream collects bytes; ``close_and_get_handle`` returns ``None`` when nothing was
written and otherwise a ``ByteStreamStateHandle`` named by a random UUID, after checking
the size against the per-state cap.
"""

from __future__ import annotations

import uuid

from sparkpoint.checkpoint.handles import ByteStreamStateHandle
from sparkpoint.checkpoint.streams import (
    CheckpointedStateScope,
    CheckpointStateOutputStream,
    CheckpointStreamFactory,
)
from sparkpoint.errors import StorageError

__all__ = [
    "DEFAULT_MAX_STATE_SIZE",
    "MemCheckpointStreamFactory",
    "MemoryCheckpointOutputStream",
    "StateSizeExceededError",
    "check_state_size",
]

DEFAULT_MAX_STATE_SIZE = 5 * 1024 * 1024
"""The default cap on one state's serialised size (5 MiB), as Flink's."""


class StateSizeExceededError(StorageError):
    """A state is larger than memory-backed checkpoint storage permits."""


def check_state_size(size: int, max_size: int) -> None:
    """Raise Flink's error when ``size`` exceeds ``max_size``."""
    if size > max_size:
        raise StateSizeExceededError(
            "Size of the state is larger than the maximum permitted memory-backed state. "
            f"Size={size} , maxSize={max_size} . "
            "Consider using a different checkpoint storage, like the FileSystemCheckpointStorage."
        )


class MemoryCheckpointOutputStream(CheckpointStateOutputStream):
    """Collects state bytes in memory; the handle holds them inline."""

    def __init__(self, max_size: int) -> None:
        if max_size <= 0:
            raise ValueError(f"max_size must be > 0, got {max_size}")
        self._max_size = max_size
        self._buffer = bytearray()
        self._closed = False

    @property
    def max_size(self) -> int:
        """The cap on the bytes one stream may hold."""
        return self._max_size

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._closed:
            raise StorageError("The stream is closed.")
        before = len(self._buffer)
        self._buffer += data
        return len(self._buffer) - before

    def tell(self) -> int:
        return len(self._buffer)

    def flush(self) -> None:
        """Nothing to flush: the bytes stay in memory until the handle is taken."""

    def close_and_get_handle(self) -> ByteStreamStateHandle | None:
        if self._closed:
            raise StorageError("Stream has already been closed and discarded.")
        self._closed = True
        data = bytes(self._buffer)
        self._buffer = bytearray()
        if not data:
            return None
        check_state_size(len(data), self._max_size)
        return ByteStreamStateHandle(str(uuid.uuid4()), data)

    def close(self) -> None:
        self._closed = True
        self._buffer = bytearray()

    @property
    def closed(self) -> bool:
        return self._closed


class MemCheckpointStreamFactory(CheckpointStreamFactory):
    """Creates in-memory checkpoint streams capped at ``max_state_size`` bytes each."""

    def __init__(self, max_state_size: int = DEFAULT_MAX_STATE_SIZE) -> None:
        if max_state_size <= 0:
            raise ValueError(f"max_state_size must be > 0, got {max_state_size}")
        self._max_state_size = max_state_size

    @property
    def max_state_size(self) -> int:
        """The cap on each state's size in bytes."""
        return self._max_state_size

    def create_checkpoint_state_output_stream(
        self, scope: CheckpointedStateScope = CheckpointedStateScope.EXCLUSIVE
    ) -> MemoryCheckpointOutputStream:
        return MemoryCheckpointOutputStream(self._max_state_size)

    def __repr__(self) -> str:
        return f"MemoryCheckpointStreamFactory(maxStateSize={self._max_state_size})"
