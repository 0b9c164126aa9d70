"""``AsyncDataStream`` as PyFlink 2.x spells it: an ``AsyncFunction`` applied to a stream
(``ordered_wait``/``unordered_wait``, with or without retries).

The operator (``runtime/operators/async_wait.py``) issues the requests of each batch
concurrently (at most ``capacity`` at a time) and completes all of them before the batch's
output leaves it: no request is ever in flight at an epoch end, so none is in flight at a
checkpoint, and a restore re-issues exactly the requests of the epochs it replays
(docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkpoint.common.time import Time, to_millis
from sparkpoint.datastream.async_functions import AsyncFunction, AsyncRetryStrategy
from sparkpoint.runtime.graph import NodeKind
from sparkpoint.runtime.operators.async_wait import AsyncWaitSettings

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream

__all__ = ["AsyncDataStream"]

DEFAULT_CAPACITY = 100


class AsyncDataStream:
    """Applies an ``AsyncFunction`` to a stream (PyFlink's ``AsyncDataStream``)."""

    @staticmethod
    def ordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Time,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> DataStream:
        """Results leave in the order of their inputs."""
        return _wait(data_stream, async_function, timeout, capacity, output_type, True, None)

    @staticmethod
    def unordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Time,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> DataStream:
        """Results leave as their requests complete."""
        return _wait(data_stream, async_function, timeout, capacity, output_type, False, None)

    @staticmethod
    def ordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Time,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> DataStream:
        """``ordered_wait`` retrying as ``async_retry_strategy`` says."""
        return _wait(
            data_stream, async_function, timeout, capacity, output_type, True, async_retry_strategy
        )

    @staticmethod
    def unordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction,
        timeout: Time,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> DataStream:
        """``unordered_wait`` retrying as ``async_retry_strategy`` says."""
        return _wait(
            data_stream, async_function, timeout, capacity, output_type, False, async_retry_strategy
        )


def _wait(
    data_stream: DataStream,
    function: AsyncFunction,
    timeout: Time,
    capacity: int,
    output_type: Any,
    ordered: bool,
    retry: AsyncRetryStrategy | None,
) -> DataStream:
    if not isinstance(function, AsyncFunction):
        raise TypeError(f"async_function must be an AsyncFunction, got {function!r}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
    timeout_ms = to_millis(timeout, what="timeout")
    if timeout_ms <= 0:
        raise ValueError(f"timeout must be positive, got {timeout_ms} ms")
    settings = AsyncWaitSettings(
        timeout_ms, capacity, ordered, None if retry is None else retry.policy
    )
    name = "AsyncWaitOperator" if ordered else "AsyncWaitOperator (unordered)"
    return data_stream._derive(
        NodeKind.ASYNC_WAIT, name, output_type, function=function, async_settings=settings
    )
