"""Async I/O as PyFlink 2.x spells it: ``AsyncFunction``, ``AsyncRetryStrategy`` and
``AsyncDataStream`` (``ordered_wait``/``unordered_wait``, with or without retries).

The operator (``runtime/operators/async_wait.py``) issues the requests of each batch
concurrently (at most ``capacity`` at a time) and completes all of them before the batch's
output leaves it:
no request is ever in flight at an epoch end, so none is in flight at a checkpoint, and a
restore re-issues exactly the requests of the epochs it replays (docs/architecture.md).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkpoint.common.time import Time, to_millis
from sparkpoint.datastream.functions import Function
from sparkpoint.runtime.operators.async_wait import AsyncWaitSettings, RetryPolicy

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream

__all__ = [
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryStrategies",
    "AsyncRetryStrategy",
]

DEFAULT_CAPACITY = 100


class AsyncFunction(Function, abc.ABC):
    """A function whose ``async_invoke`` is a coroutine returning a list of results."""

    @abc.abstractmethod
    async def async_invoke(self, value: Any) -> list[Any]:
        """The results for ``value`` (a list; empty for none)."""

    def timeout(self, value: Any) -> list[Any]:
        """Called when ``value``'s request timed out; by default the job fails, as in Flink."""
        raise TimeoutError(f"Async function call has timed out (input {value!r}).")


class AsyncRetryStrategy:
    """When and how often a request is tried again (PyFlink's ``AsyncRetryStrategy``)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    @staticmethod
    def no_restart() -> AsyncRetryStrategy:
        """Never retry."""
        return AsyncRetryStrategy(RetryPolicy(0, 0, 0, 1.0))

    @staticmethod
    def fixed_delay(
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[BaseException], bool] | None = None,
    ) -> AsyncRetryStrategy:
        """Retry up to ``max_attempts`` times, ``backoff_time_millis`` apart, when the results
        match ``result_predicate`` or the request raised what ``exception_predicate`` accepts."""
        return AsyncRetryStrategy(
            RetryPolicy(
                _count(max_attempts, "max_attempts"),
                _count(backoff_time_millis, "backoff"),
                _count(backoff_time_millis, "backoff"),
                1.0,
                result_predicate,
                exception_predicate,
            )
        )

    @staticmethod
    def exponential_backoff(
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[BaseException], bool] | None = None,
    ) -> AsyncRetryStrategy:
        """Like ``fixed_delay``, the delay growing by ``multiplier`` up to ``max_retry_delay``."""
        if multiplier < 1.0:
            raise ValueError(f"multiplier must be >= 1, got {multiplier}")
        return AsyncRetryStrategy(
            RetryPolicy(
                _count(max_attempts, "max_attempts"),
                _count(initial_delay, "initial_delay"),
                _count(max_retry_delay, "max_retry_delay"),
                float(multiplier),
                result_predicate,
                exception_predicate,
            )
        )


class AsyncRetryStrategies:
    """Flink's ``AsyncRetryStrategies`` holder: the same factories as ``AsyncRetryStrategy``."""

    NO_RETRY_STRATEGY = AsyncRetryStrategy.no_restart()
    fixed_delay = staticmethod(AsyncRetryStrategy.fixed_delay)
    exponential_backoff = staticmethod(AsyncRetryStrategy.exponential_backoff)


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return value


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
    from sparkpoint.datastream.data_stream import DataStream

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
    node = data_stream._add("async_wait", name, output_type, function=function, call=settings)
    return DataStream(data_stream._env, node)
