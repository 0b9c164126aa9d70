"""The clock every time-based decision reads, so that tests can drive time.

``now_ms`` is wall-clock time in milliseconds since the Unix epoch (processing time, TTL
timestamps, checkpoint timestamps); ``monotonic_ms`` never goes back (intervals, timeouts,
restart delays, idleness). Code takes a ``Clock`` argument defaulting to ``SYSTEM_CLOCK``;
tests pass ``sparkpoint.testing.ManualClock``. Executors are other processes, so a job's
tasks do not read the driver's clock object: the job master reads ``now_ms`` once per epoch
and ships it, and the tasks of that epoch see it as a ``FixedClock``.
"""

from __future__ import annotations

import abc
import time

__all__ = ["SYSTEM_CLOCK", "Clock", "FixedClock", "SystemClock"]


class Clock(abc.ABC):
    """A source of wall-clock and monotonic time in milliseconds."""

    @abc.abstractmethod
    def now_ms(self) -> int:
        """Wall-clock time: milliseconds since the Unix epoch."""

    @abc.abstractmethod
    def monotonic_ms(self) -> int:
        """Milliseconds of a clock that never goes back (only differences mean anything)."""


class SystemClock(Clock):
    """The machine's clocks (``time.time_ns`` and ``time.monotonic_ns``)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


SYSTEM_CLOCK = SystemClock()


class FixedClock(Clock):
    """A clock that stands still at ``ms``: the processing time of one epoch in its tasks."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def now_ms(self) -> int:
        return self.ms

    def monotonic_ms(self) -> int:
        return self.ms

    def __repr__(self) -> str:
        return f"FixedClock({self.ms})"
