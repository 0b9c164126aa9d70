"""The async I/O functions as PyFlink 2.x spells them: ``AsyncFunction``,
``AsyncRetryStrategy`` and ``AsyncRetryStrategies`` (``pyflink.datastream.functions``
exports them too); ``async_data_stream`` applies them to a stream."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from sparkpoint.runtime.operators.async_wait import RetryPolicy
from sparkpoint.state.functions import Function

__all__ = ["AsyncFunction", "AsyncRetryPredicate", "AsyncRetryStrategies", "AsyncRetryStrategy"]


class AsyncFunction(Function, abc.ABC):
    """A function whose ``async_invoke`` is a coroutine returning a list of results."""

    @abc.abstractmethod
    async def async_invoke(self, value: Any) -> list[Any]:
        """The results for ``value`` (a list; empty for none)."""

    def timeout(self, value: Any) -> list[Any]:
        """Called when ``value``'s request timed out; by default the job fails, as in Flink."""
        raise TimeoutError(f"Async function call has timed out (input {value!r}).")


class AsyncRetryPredicate:
    """Which results and exceptions are retried (PyFlink's ``AsyncRetryPredicate``)."""

    def __init__(
        self,
        result_predicate: Callable[[list[Any]], bool] | None = None,
        exception_predicate: Callable[[BaseException], bool] | None = None,
    ) -> None:
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> Callable[[list[Any]], bool] | None:
        """The test of a result list that asks for a retry (None: results never do)."""
        return self._result_predicate

    def exception_predicate(self) -> Callable[[BaseException], bool] | None:
        """The test of an exception that asks for a retry (None: exceptions never do)."""
        return self._exception_predicate


class AsyncRetryStrategy:
    """When and how often a request is tried again (PyFlink's ``AsyncRetryStrategy``)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    def can_retry(self, current_attempts: int) -> bool:
        """Whether attempt ``current_attempts`` (1 for the first retry) may run."""
        return current_attempts <= self.policy.max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        """The delay before retry ``current_attempts``."""
        return int(self.policy.delay_ms(current_attempts))

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        """The results and exceptions this strategy retries."""
        return AsyncRetryPredicate(self.policy.result_predicate, self.policy.exception_predicate)

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
