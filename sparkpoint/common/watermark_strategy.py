"""``WatermarkStrategy`` and ``TimestampAssigner`` (``pyflink.common.watermark_strategy``).

A strategy is plain configuration that the runtime ships to executors. The engine side asks
it for a ``WatermarkGenerator`` per source split or subtask (``create_watermark_generator``)
and for the ``TimestampAssigner`` (``get_timestamp_assigner``). The generators follow Flink's
built-in ones exactly:

* bounded out-of-orderness B: ``watermark = max_timestamp - B - 1``
* monotonous timestamps: the same with ``B = 0``, i.e. ``max_timestamp - 1``
* no watermarks: always ``MIN_WATERMARK``

Until the first event every generator reports ``MIN_WATERMARK``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.common.time import Duration

__all__ = [
    "MAX_WATERMARK",
    "MIN_WATERMARK",
    "NO_TIMESTAMP",
    "BoundedOutOfOrdernessWatermarks",
    "NoWatermarksGenerator",
    "TimestampAssigner",
    "WatermarkAlignmentParams",
    "WatermarkGenerator",
    "WatermarkStrategy",
    "WatermarksWithIdleness",
]

MAX_WATERMARK = 2**63 - 1
"""Watermark that ends event time (Java ``Long.MAX_VALUE``): every event-time timer fires."""

MIN_WATERMARK = -(2**63)
"""Watermark before any event has been seen (Java ``Long.MIN_VALUE``)."""

NO_TIMESTAMP = MIN_WATERMARK
"""``record_timestamp`` passed to an assigner when the record carries no timestamp yet."""

_DEFAULT_ALIGNMENT_UPDATE_INTERVAL_MS = 1000


class TimestampAssigner(abc.ABC):
    """Assigns event-time timestamps (milliseconds since the epoch) to records."""

    @abc.abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """The event timestamp of ``value``; ``record_timestamp`` is its previous one or
        ``NO_TIMESTAMP``."""


class _CallableTimestampAssigner(TimestampAssigner):
    """Adapts a plain ``fn(value, record_timestamp) -> int`` to ``TimestampAssigner``."""

    def __init__(self, fn: Callable[[Any, int], int]) -> None:
        self._fn = fn

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """Delegate to the wrapped callable."""
        return self._fn(value, record_timestamp)


class WatermarkGenerator(abc.ABC):
    """Engine-side watermark tracker for one source split or subtask (not thread-safe)."""

    @abc.abstractmethod
    def on_event(self, event_timestamp: int) -> None:
        """Account for one record with the given event timestamp."""

    @abc.abstractmethod
    def current_watermark(self) -> int:
        """The watermark to emit now; never decreases between calls."""

    def is_idle(self) -> bool:
        """Whether the input counts as idle (excluded from the minimum watermark)."""
        return False


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Flink's ``BoundedOutOfOrdernessWatermarks``: ``max_timestamp - out_of_orderness - 1``."""

    def __init__(self, out_of_orderness_ms: int) -> None:
        if out_of_orderness_ms < 0:
            raise ValueError(
                f"max_out_of_orderness must not be negative, got {out_of_orderness_ms} ms"
            )
        self._out_of_orderness_ms = out_of_orderness_ms
        # Start so that the first watermark is exactly MIN_WATERMARK (no underflow).
        self._max_timestamp = MIN_WATERMARK + out_of_orderness_ms + 1

    @property
    def out_of_orderness_ms(self) -> int:
        """The configured bound in milliseconds."""
        return self._out_of_orderness_ms

    def on_event(self, event_timestamp: int) -> None:
        """Raise the maximum seen timestamp."""
        if event_timestamp > self._max_timestamp:
            self._max_timestamp = event_timestamp

    def current_watermark(self) -> int:
        """``max_timestamp - out_of_orderness - 1``."""
        return self._max_timestamp - self._out_of_orderness_ms - 1


class NoWatermarksGenerator(WatermarkGenerator):
    """Flink's ``NoWatermarksGenerator``: event time never advances."""

    def on_event(self, event_timestamp: int) -> None:
        """Ignore the event."""

    def current_watermark(self) -> int:
        """Always ``MIN_WATERMARK``."""
        return MIN_WATERMARK


class WatermarksWithIdleness(WatermarkGenerator):
    """Wraps a generator and reports idleness after ``idle_timeout_ms`` without events.

    The timer starts when the generator is created, so an input that never produces a record
    becomes idle after the timeout too (as Flink's ``IdlenessTimer`` does).
    """

    def __init__(
        self,
        wrapped: WatermarkGenerator,
        idle_timeout_ms: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if idle_timeout_ms <= 0:
            raise ValueError(f"idle_timeout must be greater than 0, got {idle_timeout_ms} ms")
        self._wrapped = wrapped
        self._idle_timeout_ms = idle_timeout_ms
        self._clock = clock
        self._last_activity_ms = clock.monotonic_ms()

    def on_event(self, event_timestamp: int) -> None:
        """Forward the event and reset the idleness timer."""
        self._wrapped.on_event(event_timestamp)
        self._last_activity_ms = self._clock.monotonic_ms()

    def current_watermark(self) -> int:
        """The wrapped generator's watermark."""
        return self._wrapped.current_watermark()

    def is_idle(self) -> bool:
        """True once no event arrived for at least the idle timeout."""
        return self._clock.monotonic_ms() - self._last_activity_ms >= self._idle_timeout_ms


@dataclass(frozen=True)
class WatermarkAlignmentParams:
    """Watermark alignment settings recorded by ``with_watermark_alignment``."""

    watermark_group: str
    max_allowed_watermark_drift_ms: int
    update_interval_ms: int


def _duration_ms(value: Duration, what: str) -> int:
    if not isinstance(value, Duration):
        raise TypeError(f"{what} must be a Duration, got {value!r}")
    return value.to_milliseconds()


class WatermarkStrategy:
    """How a source assigns timestamps and generates watermarks (builder and factory)."""

    _MONOTONOUS = "monotonous"
    _BOUNDED = "bounded_out_of_orderness"
    _NONE = "no_watermarks"

    def __init__(
        self,
        kind: str,
        out_of_orderness_ms: int = 0,
        timestamp_assigner: TimestampAssigner | None = None,
        idle_timeout_ms: int | None = None,
        alignment: WatermarkAlignmentParams | None = None,
    ) -> None:
        if kind not in (self._MONOTONOUS, self._BOUNDED, self._NONE):
            raise ValueError(f"Unknown watermark strategy kind {kind!r}")
        if out_of_orderness_ms < 0:
            raise ValueError(
                f"max_out_of_orderness must not be negative, got {out_of_orderness_ms} ms"
            )
        self._kind = kind
        self._out_of_orderness_ms = out_of_orderness_ms
        self._timestamp_assigner = timestamp_assigner
        self._idle_timeout_ms = idle_timeout_ms
        self._alignment = alignment

    # ---- PyFlink API -------------------------------------------------------------------

    def with_timestamp_assigner(
        self, timestamp_assigner: TimestampAssigner | Callable[[Any, int], int]
    ) -> WatermarkStrategy:
        """Use ``timestamp_assigner`` for record timestamps (modifies and returns ``self``,
        as PyFlink does)."""
        if isinstance(timestamp_assigner, TimestampAssigner):
            self._timestamp_assigner = timestamp_assigner
        elif callable(timestamp_assigner):
            self._timestamp_assigner = _CallableTimestampAssigner(timestamp_assigner)
        else:
            raise TypeError(
                "timestamp_assigner must be a TimestampAssigner or a callable "
                f"(value, record_timestamp) -> int, got {timestamp_assigner!r}"
            )
        return self

    def with_idleness(self, idle_timeout: Duration) -> WatermarkStrategy:
        """A copy that marks an input idle after ``idle_timeout`` without records."""
        idle_ms = _duration_ms(idle_timeout, "idle_timeout")
        if idle_ms <= 0:
            raise ValueError(f"idle_timeout must be greater than 0, got {idle_timeout}")
        return self._copy(idle_timeout_ms=idle_ms)

    def with_watermark_alignment(
        self,
        watermark_group: str,
        max_allowed_watermark_drift: Duration,
        update_interval: Duration | None = None,
    ) -> WatermarkStrategy:
        """A copy that records watermark alignment for ``watermark_group``."""
        if not isinstance(watermark_group, str) or not watermark_group:
            raise ValueError(f"watermark_group must be a non-empty string, got {watermark_group!r}")
        drift_ms = _duration_ms(max_allowed_watermark_drift, "max_allowed_watermark_drift")
        interval_ms = (
            _DEFAULT_ALIGNMENT_UPDATE_INTERVAL_MS
            if update_interval is None
            else _duration_ms(update_interval, "update_interval")
        )
        if drift_ms <= 0 or interval_ms <= 0:
            raise ValueError("max_allowed_watermark_drift and update_interval must be positive")
        alignment = WatermarkAlignmentParams(watermark_group, drift_ms, interval_ms)
        return self._copy(alignment=alignment)

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        """Watermarks that follow ascending timestamps: ``max_timestamp - 1``."""
        return WatermarkStrategy(WatermarkStrategy._MONOTONOUS)

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> WatermarkStrategy:
        """Watermarks that trail the maximum timestamp by ``max_out_of_orderness`` (+1 ms)."""
        bound_ms = _duration_ms(max_out_of_orderness, "max_out_of_orderness")
        return WatermarkStrategy(WatermarkStrategy._BOUNDED, out_of_orderness_ms=bound_ms)

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        """No watermarks at all (pure processing-time jobs)."""
        return WatermarkStrategy(WatermarkStrategy._NONE)

    # ---- engine side -------------------------------------------------------------------

    def create_watermark_generator(self, clock: Clock = SYSTEM_CLOCK) -> WatermarkGenerator:
        """A fresh generator; ``clock`` (its monotonic time) drives idleness detection."""
        generator: WatermarkGenerator
        if self._kind == self._NONE:
            generator = NoWatermarksGenerator()
        else:
            generator = BoundedOutOfOrdernessWatermarks(self._out_of_orderness_ms)
        if self._idle_timeout_ms is not None:
            generator = WatermarksWithIdleness(generator, self._idle_timeout_ms, clock)
        return generator

    def get_timestamp_assigner(self) -> TimestampAssigner | None:
        """The assigner set by ``with_timestamp_assigner``, or None (keep record timestamps)."""
        return self._timestamp_assigner

    def get_out_of_orderness_ms(self) -> int:
        """The out-of-orderness bound in milliseconds (0 for monotonous and no watermarks)."""
        return self._out_of_orderness_ms

    def get_idle_timeout_ms(self) -> int | None:
        """The idle timeout in milliseconds, or None when idleness detection is off."""
        return self._idle_timeout_ms

    def get_watermark_alignment(self) -> WatermarkAlignmentParams | None:
        """The alignment settings, or None when alignment is not configured."""
        return self._alignment

    def generates_watermarks(self) -> bool:
        """False only for ``no_watermarks()``."""
        return self._kind != self._NONE

    def _copy(self, **changes: Any) -> WatermarkStrategy:
        params: dict[str, Any] = {
            "kind": self._kind,
            "out_of_orderness_ms": self._out_of_orderness_ms,
            "timestamp_assigner": self._timestamp_assigner,
            "idle_timeout_ms": self._idle_timeout_ms,
            "alignment": self._alignment,
        }
        params.update(changes)
        return WatermarkStrategy(**params)

    def __repr__(self) -> str:
        parts = [self._kind]
        if self._kind == self._BOUNDED:
            parts.append(f"out_of_orderness={self._out_of_orderness_ms} ms")
        if self._idle_timeout_ms is not None:
            parts.append(f"idle_timeout={self._idle_timeout_ms} ms")
        if self._alignment is not None:
            parts.append(f"alignment_group={self._alignment.watermark_group!r}")
        return f"WatermarkStrategy({', '.join(parts)})"
