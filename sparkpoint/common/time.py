"""``Duration`` and ``Time`` as PyFlink's ``pyflink.common.time`` spells them, in pure Python."""

from __future__ import annotations

import datetime
import functools

from sparkpoint.config import format_duration_ms, parse_duration_ms

__all__ = ["Duration", "Instant", "Time", "to_millis"]


def _whole(count: object, unit: str) -> int:
    """``count`` if it is a whole number of ``unit``; else a ``TypeError`` naming the value."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"expected a whole number of {unit}, got {count!r}")
    return count


@functools.total_ordering
class Duration:
    """An amount of time with millisecond precision (``pyflink.common.Duration``)."""

    __slots__ = ("_millis",)

    def __init__(self, millis: int = 0) -> None:
        if isinstance(millis, bool) or not isinstance(millis, int):
            raise TypeError(f"Duration takes whole milliseconds, got {millis!r}")
        self._millis = millis

    @staticmethod
    def of_millis(millis: int) -> Duration:
        """A duration of ``millis`` milliseconds."""
        return Duration(millis)

    @staticmethod
    def of_nanos(nanos: int) -> Duration:
        """A duration of ``nanos`` nanoseconds: whole milliseconds only (sparkpoint's
        durations have millisecond precision; a finer one is refused, not rounded)."""
        millis, rest = divmod(_whole(nanos, "nanoseconds"), 1_000_000)
        if rest:
            raise ValueError(f"Duration has millisecond precision: {nanos} ns is not whole ms")
        return Duration(millis)

    @staticmethod
    def of_seconds(seconds: int) -> Duration:
        """A duration of ``seconds`` seconds."""
        return Duration(_whole(seconds, "seconds") * 1000)

    @staticmethod
    def of_minutes(minutes: int) -> Duration:
        """A duration of ``minutes`` minutes."""
        return Duration(_whole(minutes, "minutes") * 60_000)

    @staticmethod
    def of_hours(hours: int) -> Duration:
        """A duration of ``hours`` hours."""
        return Duration(_whole(hours, "hours") * 3_600_000)

    @staticmethod
    def of_days(days: int) -> Duration:
        """A duration of ``days`` days."""
        return Duration(_whole(days, "days") * 86_400_000)

    @staticmethod
    def parse(text: str) -> Duration:
        """A duration from a Flink duration string such as ``"10 min"`` or ``"500 ms"``."""
        return Duration(parse_duration_ms(text))

    @staticmethod
    def from_timedelta(delta: datetime.timedelta) -> Duration:
        """The duration of a ``timedelta`` (truncated to whole milliseconds)."""
        return Duration(delta // datetime.timedelta(milliseconds=1))

    def to_milliseconds(self) -> int:
        """The length in milliseconds."""
        return self._millis

    def to_timedelta(self) -> datetime.timedelta:
        """The same length as a ``timedelta``."""
        return datetime.timedelta(milliseconds=self._millis)

    def is_zero(self) -> bool:
        """Whether the duration is zero."""
        return self._millis == 0

    def is_negative(self) -> bool:
        """Whether the duration is below zero."""
        return self._millis < 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and self._millis == other._millis

    def __lt__(self, other: Duration) -> bool:
        if not isinstance(other, Duration):
            return NotImplemented
        return self._millis < other._millis

    def __hash__(self) -> int:
        return hash(("Duration", self._millis))

    def __repr__(self) -> str:
        return f"Duration.of_millis({self._millis})"

    def __str__(self) -> str:
        return format_duration_ms(self._millis)


@functools.total_ordering
class Time:
    """A time interval for windows and restart delays (``pyflink.common.Time``)."""

    __slots__ = ("_millis",)

    def __init__(self, milliseconds: int) -> None:
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, int):
            raise TypeError(f"Time takes whole milliseconds, got {milliseconds!r}")
        self._millis = milliseconds

    @staticmethod
    def milliseconds(milliseconds: int) -> Time:
        """``milliseconds`` milliseconds."""
        return Time(milliseconds)

    @staticmethod
    def seconds(seconds: int) -> Time:
        """``seconds`` seconds."""
        return Time(_whole(seconds, "seconds") * 1000)

    @staticmethod
    def minutes(minutes: int) -> Time:
        """``minutes`` minutes."""
        return Time(_whole(minutes, "minutes") * 60_000)

    @staticmethod
    def hours(hours: int) -> Time:
        """``hours`` hours."""
        return Time(_whole(hours, "hours") * 3_600_000)

    @staticmethod
    def days(days: int) -> Time:
        """``days`` days."""
        return Time(_whole(days, "days") * 86_400_000)

    def to_milliseconds(self) -> int:
        """The length in milliseconds."""
        return self._millis

    def to_duration(self) -> Duration:
        """The same length as a ``Duration``."""
        return Duration(self._millis)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Time) and self._millis == other._millis

    def __lt__(self, other: Time) -> bool:
        if not isinstance(other, Time):
            return NotImplemented
        return self._millis < other._millis

    def __hash__(self) -> int:
        return hash(("Time", self._millis))

    def __repr__(self) -> str:
        return f"Time.milliseconds({self._millis})"

    def __str__(self) -> str:
        return f"{self._millis} ms"


def to_millis(value: Duration | Time | datetime.timedelta | int, *, what: str = "value") -> int:
    """Milliseconds of a ``Duration``, ``Time``, ``timedelta`` or plain int (already ms)."""
    if isinstance(value, (Duration, Time)):
        return value.to_milliseconds()
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(
        f"{what} must be a Duration, Time, timedelta or int milliseconds, got {value!r}"
    )


class Instant:
    """A point in time: seconds and nanoseconds since the epoch (``pyflink.common.Instant``)."""

    def __init__(self, seconds: int, nanos: int) -> None:
        self.seconds = seconds
        self.nanos = nanos

    def to_epoch_milli(self) -> int:
        """Milliseconds since the epoch (Java's ``Instant.toEpochMilli``)."""
        return self.seconds * 1000 + self.nanos // 1_000_000

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> Instant:
        """The instant ``epoch_milli`` milliseconds after the epoch."""
        seconds, millis = divmod(epoch_milli, 1000)
        return Instant(seconds, millis * 1_000_000)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Instant) and (self.seconds, self.nanos) == (
            other.seconds,
            other.nanos,
        )

    def __hash__(self) -> int:
        return hash((self.seconds, self.nanos))

    def __repr__(self) -> str:
        return f"Instant<{self.seconds}, {self.nanos}>"
