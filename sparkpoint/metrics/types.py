"""PyFlink's metric types (``pyflink.metrics``): Counter, Meter, Distribution, and the gauge
holder. A per-record call is a plain int add (counters, meters) or one list append
(distributions, summarised per batch): nothing is sent or aggregated per record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Counter", "Distribution", "Gauge", "Meter", "Metric"]


class Metric:
    """Base of every metric (``pyflink.metrics.Metric``)."""

    __slots__ = ()


class Counter(Metric):
    """A count that goes up and down (``pyflink.metrics.Counter``)."""

    __slots__ = ("_count",)

    def __init__(self, start: int = 0) -> None:
        self._count = start

    def inc(self, n: int = 1) -> None:
        """Add ``n``."""
        self._count += n

    def dec(self, n: int = 1) -> None:
        """Subtract ``n``."""
        self._count -= n

    def get_count(self) -> int:
        """The current count."""
        return self._count


class Meter(Metric):
    """Counts events (``pyflink.metrics.Meter``); the driver derives the rate over
    ``time_span_in_seconds`` from the counts the epochs report, as Flink's ``MeterView``."""

    __slots__ = ("_count", "time_span_in_seconds")

    def __init__(self, time_span_in_seconds: int = 60, start: int = 0) -> None:
        if int(time_span_in_seconds) <= 0:
            raise ValueError(
                f"A meter's time_span_in_seconds must be above 0, not {time_span_in_seconds!r}"
            )
        self.time_span_in_seconds = int(time_span_in_seconds)
        self._count = start

    def mark_event(self, value: int = 1) -> None:
        """Record ``value`` events."""
        self._count += value

    def get_count(self) -> int:
        """Events recorded so far."""
        return self._count


class Distribution(Metric):
    """Summarises the values it is given (``pyflink.metrics.Distribution``, Beam's): count,
    sum, min and max.

    ``update(value)`` records one value. It is the bound ``append`` of a list of pending
    values, so a call runs no Python code of ours (under half the instructions of the Python
    method it replaced, which matters in a function called per record); the pending values
    are summarised in bulk by ``fold``, which the task calls after every batch it pushes
    through and which reading ``count``, ``sum``, ``min`` or ``max`` calls first.
    """

    __slots__ = ("_count", "_max", "_min", "_pending", "_sum", "name", "update")

    update: Callable[[float], None]

    def __init__(
        self,
        count: int = 0,
        sum: float = 0,
        min: float | None = None,
        max: float | None = None,
        name: str = "distribution",
    ) -> None:
        self.name = name
        self._count = count
        self._sum = sum
        self._min = min
        self._max = max
        self._pending: list[float] = []
        self.update = self._pending.append

    def fold(self) -> None:
        """Summarise the values recorded since the last fold into count, sum, min and max.
        Raises TypeError naming the distribution and the first value that is not a number
        (the values are dropped: the distribution stays as it was before them)."""
        pending = self._pending
        if not pending:
            return
        try:
            total = sum(pending, self._sum)
            low, high = min(pending), max(pending)
            if self._min is not None and self._max is not None:
                low, high = min(low, self._min), max(high, self._max)
        except (TypeError, ValueError):
            bad = next((v for v in pending if not _is_number(v)), pending[0])
            pending.clear()
            raise TypeError(
                f"Distribution {self.name!r} takes numbers: update() was given {bad!r} "
                f"({type(bad).__name__})"
            ) from None
        self._count += len(pending)
        self._sum, self._min, self._max = total, low, high
        pending.clear()

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles get a pending list of their own (the default would keep
        # ``update`` bound to this distribution's list): they carry the folded summary.
        return (Distribution, (self.count, self.sum, self.min, self.max, self.name))

    @property
    def count(self) -> int:
        """Values recorded."""
        self.fold()
        return self._count

    @property
    def sum(self) -> float:
        """Sum of the values recorded."""
        self.fold()
        return self._sum

    @property
    def min(self) -> float | None:
        """Smallest value recorded (None before the first)."""
        self.fold()
        return self._min

    @property
    def max(self) -> float | None:
        """Largest value recorded (None before the first)."""
        self.fold()
        return self._max


def _is_number(value: object) -> bool:
    """Whether ``value`` can be summed and ordered as a distribution's values are."""
    try:
        value + 0  # type: ignore[operator]
        value < 0  # type: ignore[operator]  # noqa: B015
    except TypeError:
        return False
    return True


class Gauge(Metric):
    """A value read when metrics are reported: the callable given to ``MetricGroup.gauge``."""

    __slots__ = ("obj",)

    def __init__(self, obj: Callable[[], float]) -> None:
        self.obj = obj

    def __call__(self) -> float:
        return self.obj()
