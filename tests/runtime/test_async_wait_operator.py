"""The async I/O operator on its own (no Spark): capacity, order, timeout, retries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sparkpoint.datastream import AsyncFunction, AsyncRetryStrategy
from sparkpoint.runtime.operators.async_wait import AsyncWaitOperator, AsyncWaitSettings


class Probe(AsyncFunction):
    """Sleeps ``(5 - value) * 10 ms``; records the largest number of requests in flight."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.calls: list[Any] = []

    async def async_invoke(self, value: Any) -> list[Any]:
        self.calls.append(value)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep((5 - value) * 0.01)
        self.in_flight -= 1
        return [value, -value]


def _op(function: Any, **settings: Any) -> AsyncWaitOperator:
    defaults: dict[str, Any] = {"timeout_ms": 10_000, "capacity": 100, "ordered": True}
    return AsyncWaitOperator("a", "async", function, AsyncWaitSettings(**{**defaults, **settings}))


def test_ordered_keeps_input_order_and_timestamps() -> None:
    values, ts = _op(Probe()).process([1, 2, 3], [10, 20, 30])
    assert values == [1, -1, 2, -2, 3, -3]
    assert ts == [10, 10, 20, 20, 30, 30]


def test_unordered_emits_in_completion_order() -> None:
    values, ts = _op(Probe(), ordered=False).process([1, 2, 3], [10, 20, 30])
    assert values == [3, -3, 2, -2, 1, -1]
    assert ts == [30, 30, 20, 20, 10, 10]


def test_capacity_bounds_requests_in_flight() -> None:
    probe = Probe()
    _op(probe, capacity=2).process([1, 2, 3, 4], None)
    assert probe.most == 2 and sorted(probe.calls) == [1, 2, 3, 4]
    wide = Probe()
    _op(wide, capacity=10).process([1, 2, 3, 4], None)
    assert wide.most == 4


class Slow(AsyncFunction):
    async def async_invoke(self, value: Any) -> list[Any]:
        await asyncio.sleep(5)
        return [value]


class SlowWithFallback(Slow):
    def timeout(self, value: Any) -> list[Any]:
        return [f"timed out {value}"]


def test_timeout_uses_the_fallback_or_fails() -> None:
    assert _op(SlowWithFallback(), timeout_ms=50).process([1], None)[0] == ["timed out 1"]
    with pytest.raises(TimeoutError, match=r"Async function call has timed out \(input 1\)"):
        _op(Slow(), timeout_ms=50).process([1], None)


class Flaky(AsyncFunction):
    def __init__(self) -> None:
        self.attempts = 0

    async def async_invoke(self, value: Any) -> list[Any]:
        self.attempts += 1
        if self.attempts < 3:
            raise ValueError("transient")
        return [self.attempts]


def test_retries_until_success_or_exhaustion() -> None:
    retry = AsyncRetryStrategy.fixed_delay(5, 1, exception_predicate=lambda e: True).policy
    flaky = Flaky()
    assert _op(flaky, retry=retry).process([0], None)[0] == [3]
    assert flaky.attempts == 3
    once = AsyncRetryStrategy.fixed_delay(1, 1, exception_predicate=lambda e: True).policy
    exhausted = Flaky()
    with pytest.raises(ValueError, match="transient"):
        _op(exhausted, retry=once).process([0], None)
    assert exhausted.attempts == 2  # the first attempt and one retry
    empty = AsyncRetryStrategy.fixed_delay(2, 1, result_predicate=lambda r: True).policy
    calls = Probe()
    assert _op(calls, retry=empty).process([4], None)[0] == [4, -4]  # last result kept
    assert calls.calls == [4, 4, 4]
