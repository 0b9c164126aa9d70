"""The raw-bytes service of checkpoint storage: stream factories and their output streams."""

from __future__ import annotations

import abc
import enum
from types import TracebackType

from sparkpoint.checkpoint.handles import StreamStateHandle

__all__ = [
    "CheckpointStateOutputStream",
    "CheckpointStreamFactory",
    "CheckpointedStateScope",
    "SharedScopeStreamFactory",
]


class CheckpointedStateScope(enum.Enum):
    """Whether state belongs to one checkpoint (EXCLUSIVE) or may be shared by several."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"


class CheckpointStateOutputStream(abc.ABC):
    """A stream that becomes a state handle when closed successfully.

    ``close_and_get_handle()`` is the close on success; plain ``close()`` (or leaving a
    ``with`` block by an exception) aborts and deletes whatever was written. Not thread-safe.
    """

    @abc.abstractmethod
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data``; returns the number of bytes written."""

    @abc.abstractmethod
    def tell(self) -> int:
        """Bytes written so far (the position the next write starts at)."""

    def get_pos(self) -> int:
        """Flink's name for ``tell``."""
        return self.tell()

    @abc.abstractmethod
    def flush(self) -> None:
        """Flush buffered bytes (never creates a file for state still under the threshold)."""

    @abc.abstractmethod
    def close_and_get_handle(self) -> StreamStateHandle | None:
        """Close and return a handle to what was written (``None`` if nothing was)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Abort: close without a handle and discard what was written. Idempotent."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """Whether the stream has been closed (either way)."""

    def __enter__(self) -> CheckpointStateOutputStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class CheckpointStreamFactory(abc.ABC):
    """Creates output streams for checkpoint state (exclusive or shared)."""

    @abc.abstractmethod
    def create_checkpoint_state_output_stream(
        self, scope: CheckpointedStateScope = CheckpointedStateScope.EXCLUSIVE
    ) -> CheckpointStateOutputStream:
        """A new stream; the handle it yields stores data inline or in a file of ``scope``."""


class SharedScopeStreamFactory(CheckpointStreamFactory):
    """Writes every stream as shared state. A changelog checkpoint's materialization
    outlives its checkpoint: later checkpoints reference it, and the shared-state registry
    deletes it once none does."""

    def __init__(self, inner: CheckpointStreamFactory) -> None:
        self._inner = inner

    def create_checkpoint_state_output_stream(
        self, scope: CheckpointedStateScope = CheckpointedStateScope.EXCLUSIVE
    ) -> CheckpointStateOutputStream:
        return self._inner.create_checkpoint_state_output_stream(CheckpointedStateScope.SHARED)
