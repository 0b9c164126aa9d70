"""The raw-bytes service of checkpoint storage: stream factories and their output streams."""

from __future__ import annotations

import abc
import enum
import threading
import time
from types import TracebackType

from sparkpoint.checkpoint.handles import StreamStateHandle

__all__ = [
    "CheckpointStateOutputStream",
    "CheckpointStreamFactory",
    "CheckpointedStateScope",
    "ForwardingOutputStream",
    "RateLimitedStreamFactory",
    "SharedScopeStreamFactory",
]

# A rate-limited stream passes on at most a tenth of a second's bytes at once (at least
# 4 KiB, at most 1 MiB), so a wrapped stream sees a write (e.g. a cancel check) that often.
_MIN_PIECE, _MAX_PIECE = 4 << 10, 1 << 20


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


class _Throttle:
    """Lets bytes through at ``rate`` per second on average (shared by threads)."""

    def __init__(self, rate: int) -> None:
        self._rate = float(rate)
        self.piece = min(_MAX_PIECE, max(_MIN_PIECE, rate // 10))
        self._lock = threading.Lock()
        self._next = time.monotonic()  # when the bytes let through so far have "drained"

    def acquire(self, n: int) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now)
            self._next = start + n / self._rate
        if start > now:
            time.sleep(start - now)


class ForwardingOutputStream(CheckpointStateOutputStream):
    """A stream that forwards every call to ``inner``: the base of wrappers that change
    one or two calls."""

    def __init__(self, inner: CheckpointStateOutputStream) -> None:
        self._inner = inner

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return self._inner.write(data)

    def tell(self) -> int:
        return self._inner.tell()

    def flush(self) -> None:
        self._inner.flush()

    def close_and_get_handle(self) -> StreamStateHandle | None:
        return self._inner.close_and_get_handle()

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return self._inner.closed


class _RateLimitedStream(ForwardingOutputStream):
    def __init__(self, inner: CheckpointStateOutputStream, throttle: _Throttle) -> None:
        super().__init__(inner)
        self._throttle = throttle

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        piece = self._throttle.piece
        for offset in range(0, len(view), piece):
            chunk = view[offset : offset + piece]
            self._throttle.acquire(len(chunk))
            self._inner.write(chunk)
        return len(view)


class RateLimitedStreamFactory(CheckpointStreamFactory):
    """Streams whose writes, all streams together, go at most ``bytes_per_second``: a
    background upload (a changelog checkpoint's materialization) that must not take the
    bandwidth of the checkpoints running meanwhile."""

    def __init__(self, inner: CheckpointStreamFactory, bytes_per_second: int) -> None:
        if bytes_per_second <= 0:
            raise ValueError(f"bytes_per_second must be positive, got {bytes_per_second}")
        self._inner = inner
        self._throttle = _Throttle(bytes_per_second)

    def create_checkpoint_state_output_stream(
        self, scope: CheckpointedStateScope = CheckpointedStateScope.EXCLUSIVE
    ) -> CheckpointStateOutputStream:
        return _RateLimitedStream(
            self._inner.create_checkpoint_state_output_stream(scope), self._throttle
        )
