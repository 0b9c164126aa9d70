"""PyFlink's metric types (``pyflink.metrics``): Counter, Meter, Distribution, and the gauge
holder. Plain attribute updates: a metric call costs what the user's own code costs."""

from __future__ import annotations

from collections.abc import Callable

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
    sum, min and max."""

    __slots__ = ("count", "max", "min", "sum")

    def __init__(
        self, count: int = 0, sum: float = 0, min: float | None = None, max: float | None = None
    ) -> None:
        self.count = count
        self.sum = sum
        self.min = min
        self.max = max

    def update(self, value: float) -> None:
        """Record one value."""
        self.count += 1
        self.sum += value
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value


class Gauge(Metric):
    """A value read when metrics are reported: the callable given to ``MetricGroup.gauge``."""

    __slots__ = ("obj",)

    def __init__(self, obj: Callable[[], float]) -> None:
        self.obj = obj

    def __call__(self) -> float:
        return self.obj()
