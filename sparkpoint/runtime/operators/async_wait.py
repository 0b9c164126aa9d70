"""The async I/O operator: issues a batch's requests concurrently and completes them all
before the batch's output leaves it.

Each request runs ``async_invoke`` under an ``asyncio`` semaphore of ``capacity`` permits,
retried as its ``RetryPolicy`` says, all within ``timeout_ms`` (Flink's timeout covers the
retries too); a request that times out yields ``timeout(value)``. Ordered: results leave in
input order; unordered: in completion order. Output records keep their input's timestamp.
Since a batch never ends with a request in flight, an epoch (a barrier) never does either:
there is nothing to snapshot, and a restore re-issues exactly the requests of the epochs it
replays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.operators.chain import Operator
from sparkpoint.runtime.operators.context import OperatorEnv, StreamRuntimeContext

__all__ = ["AsyncWaitOperator", "AsyncWaitSettings", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """Up to ``max_attempts`` retries, the delay from ``initial_delay_ms`` growing by
    ``multiplier`` up to ``max_delay_ms``, when a predicate says the attempt should be retried."""

    max_attempts: int
    initial_delay_ms: int
    max_delay_ms: int
    multiplier: float
    result_predicate: Callable[[list[Any]], bool] | None = None
    exception_predicate: Callable[[BaseException], bool] | None = None

    def delay_ms(self, retry: int) -> float:
        """The pause before retry number ``retry`` (1-based)."""
        return float(min(self.initial_delay_ms * self.multiplier ** (retry - 1), self.max_delay_ms))


@dataclass(frozen=True)
class AsyncWaitSettings:
    """What ``AsyncDataStream`` was asked for."""

    timeout_ms: int
    capacity: int
    ordered: bool
    retry: RetryPolicy | None = None


class AsyncWaitOperator(Operator):
    """Applies an ``AsyncFunction`` to each batch (see the module docstring)."""

    def __init__(
        self, operator_id: str, name: str, function: Any, settings: AsyncWaitSettings
    ) -> None:
        super().__init__(operator_id, name)
        self.function = function
        self.settings = settings

    def open(self, env: OperatorEnv) -> None:
        open_ = getattr(self.function, "open", None)
        if open_ is not None:
            open_(StreamRuntimeContext(env, self.name, None, self.operator_id))
        super().open(env)

    def close(self) -> None:
        close = getattr(self.function, "close", None)
        if close is not None:
            close()
        super().close()

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        if not values:
            return values, timestamps
        finished = asyncio.run(self._run_all(values))
        if self.settings.ordered:
            finished.sort(key=lambda done: done[0])
        out_v: list[Any] = []
        out_t: list[int | None] = []
        for index, results in finished:
            ts = None if timestamps is None else timestamps[index]
            out_v.extend(results)
            out_t.extend([ts] * len(results))
        return out_v, out_t

    async def _run_all(self, values: list[Any]) -> list[tuple[int, list[Any]]]:
        permits = asyncio.Semaphore(self.settings.capacity)
        finished: list[tuple[int, list[Any]]] = []

        async def one(index: int, value: Any) -> None:
            async with permits:
                results = await self._request(value)
            finished.append((index, results))  # completion order

        await asyncio.gather(*(one(i, v) for i, v in enumerate(values)))
        return finished

    async def _request(self, value: Any) -> list[Any]:
        try:
            results = await asyncio.wait_for(
                self._with_retries(value), self.settings.timeout_ms / 1000.0
            )
        except TimeoutError:
            results = self.function.timeout(value)
        return list(results) if results is not None else []

    async def _with_retries(self, value: Any) -> Any:
        policy = self.settings.retry
        retry = 0
        while True:
            try:
                results = await self.function.async_invoke(value)
            except Exception as exc:
                if (
                    policy is None
                    or retry >= policy.max_attempts
                    or policy.exception_predicate is None
                    or not policy.exception_predicate(exc)
                ):
                    raise
            else:
                if (
                    policy is None
                    or retry >= policy.max_attempts
                    or policy.result_predicate is None
                    or not policy.result_predicate(list(results or []))
                ):
                    return results
            retry += 1
            await asyncio.sleep(policy.delay_ms(retry) / 1000.0)
