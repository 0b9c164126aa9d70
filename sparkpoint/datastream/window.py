"""Windows, window assigners and triggers, spelled as ``pyflink.datastream.window``.

The semantics are PyFlink's (2.3), which follow Flink's ``WindowOperator`` except where
noted in docs/windows.md (count windows, the firing of timers registered while firing).
The runtime (``sparkpoint.runtime.operators.window_operator``) calls these objects by their PyFlink
method names; windows are values (hashable, picklable) and are stored in keyed state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable
from enum import Enum
from typing import Any, Generic, TypeVar

from sparkpoint.common.time import Time, to_millis
from sparkpoint.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from sparkpoint.state.descriptors import ReducingStateDescriptor, ValueStateDescriptor
from sparkpoint.state.typeinfo import Types

__all__ = [
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountSlidingWindowAssigner",
    "CountTrigger",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "GlobalWindow",
    "GlobalWindows",
    "MergingWindowAssigner",
    "NeverTrigger",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "SessionWindowTimeGapExtractor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeWindow",
    "Trigger",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
]

# PyFlink's names for the bounds of event time (Java Long.MAX_VALUE / MIN_VALUE).
MAX_LONG_VALUE = MAX_WATERMARK
MIN_LONG_VALUE = MIN_WATERMARK

T = TypeVar("T")
W = TypeVar("W")
MW = TypeVar("MW")  # the window type of a MergeCallback


def _long_to_int_with_bit_mixing(x: int) -> int:
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB
    return x ^ (x >> 31)


def _mod_inverse(x: int) -> int:
    inverse = x * x * x
    inverse *= 2 - x * inverse
    inverse *= 2 - x * inverse
    inverse *= 2 - x * inverse
    return inverse


def _millis(value: Time | int, what: str) -> int:
    return to_millis(value, what=what)


def _offset_millis(offset: Time | int | None) -> int:
    return 0 if offset is None else _millis(offset, "offset")


# ---- windows ---------------------------------------------------------------------------------


class Window(ABC):
    """A finite bucket of elements; every element of it has arrived once time passes
    ``max_timestamp()``."""

    @abstractmethod
    def max_timestamp(self) -> int:
        """The largest timestamp that still belongs to this window."""


class TimeWindow(Window):
    """The interval ``[start, end)``."""

    __slots__ = ("_hash", "end", "start")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self._hash: int | None = None

    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """Whether the two windows overlap or touch."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window covering both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """The start of the window of ``window_size`` (shifted by ``offset``) holding
        ``timestamp``; also for negative timestamps."""
        return timestamp - (timestamp - offset + window_size) % window_size

    @staticmethod
    def merge_windows(
        windows: Iterable[TimeWindow], callback: MergingWindowAssigner.MergeCallback
    ) -> None:
        """Merge overlapping windows: ``callback.merge(merged_set, cover)`` per group of two
        or more (the sets are Python sets of windows, as PyFlink's)."""
        candidates = sorted(windows)
        merged: list[tuple[TimeWindow, set[TimeWindow]]] = []
        current: TimeWindow | None = None
        current_set: set[TimeWindow] = set()
        for candidate in candidates:
            if current is None:
                current = candidate
                current_set.add(candidate)
            elif current.intersects(candidate):
                current = current.cover(candidate)
                current_set.add(candidate)
            else:
                merged.append((current, current_set))
                current = candidate
                current_set = {candidate}
        if current is not None:
            merged.append((current, current_set))
        for cover, members in merged:
            if len(members) > 1:
                callback.merge(members, cover)

    # PyFlink's hash (sets of windows iterate in the same order as under PyFlink), cached:
    # it multiplies big integers, and windows are state keys.
    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(self.start + _mod_inverse((self.end << 1) + 1))
        return h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimeWindow) and self.end == other.end and self.start == other.start

    def __lt__(self, other: TimeWindow) -> bool:
        if not isinstance(other, TimeWindow):
            raise TypeError(f"Cannot compare a TimeWindow with {other!r}")
        return (self.start, self.end) < (other.start, other.end)

    def __getstate__(self) -> tuple[int, int]:
        return (self.start, self.end)

    def __setstate__(self, state: tuple[int, int]) -> None:
        self.start, self.end = state
        self._hash = None

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


class CountWindow(Window):
    """A count window, identified by its number ``id``."""

    __slots__ = ("id",)

    def __init__(self, id: int) -> None:
        self.id = id

    def max_timestamp(self) -> int:
        return MAX_LONG_VALUE

    def __hash__(self) -> int:
        return _long_to_int_with_bit_mixing(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountWindow) and self.id == other.id

    def __getstate__(self) -> int:
        return self.id

    def __setstate__(self, state: int) -> None:
        self.id = state

    def __repr__(self) -> str:
        return f"CountWindow(id={self.id})"


class GlobalWindow(Window):
    """The single window of ``GlobalWindows``."""

    __slots__ = ()

    @staticmethod
    def get() -> GlobalWindow:
        return GlobalWindow()

    def max_timestamp(self) -> int:
        return MAX_LONG_VALUE

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalWindow)

    def __hash__(self) -> int:
        return 0

    def __getstate__(self) -> int:
        return 0

    def __setstate__(self, state: int) -> None:
        pass

    def __repr__(self) -> str:
        return "GlobalWindow"


# ---- triggers --------------------------------------------------------------------------------


class TriggerResult(Enum):
    """What a trigger decides for a window: (fire, purge)."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return bool(self.value[0])

    def is_purge(self) -> bool:
        return bool(self.value[1])


class Trigger(ABC, Generic[T, W]):
    """Decides when a window (of one key) is evaluated and when it is purged. Keep no state
    in the trigger object: use ``ctx.get_partitioned_state`` (per key and window)."""

    class TriggerContext(ABC):
        """What a trigger method may do: read time, set timers, use partitioned state."""

        @abstractmethod
        def get_current_processing_time(self) -> int: ...

        @abstractmethod
        def get_metric_group(self) -> Any: ...

        @abstractmethod
        def get_current_watermark(self) -> int: ...

        @abstractmethod
        def register_processing_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def register_event_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def delete_processing_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def delete_event_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def get_partitioned_state(self, state_descriptor: Any) -> Any: ...

    class OnMergeContext(TriggerContext):
        """The context of ``on_merge``: can merge partitioned state of the merged windows."""

        @abstractmethod
        def merge_partitioned_state(self, state_descriptor: Any) -> None: ...

    @abstractmethod
    def on_element(self, element: T, timestamp: int, window: W, ctx: Any) -> TriggerResult:
        """Called for every element added to a window."""

    @abstractmethod
    def on_processing_time(self, time: int, window: W, ctx: Any) -> TriggerResult:
        """Called when a processing-time timer of this trigger fires."""

    @abstractmethod
    def on_event_time(self, time: int, window: W, ctx: Any) -> TriggerResult:
        """Called when an event-time timer of this trigger fires."""

    def can_merge(self) -> bool:
        """Whether this trigger supports merging windows (sessions)."""
        return False

    @abstractmethod
    def on_merge(self, window: W, ctx: Any) -> None:
        """Windows were merged into ``window``: re-register timers, merge state."""

    @abstractmethod
    def clear(self, window: W, ctx: Any) -> None:
        """The window is removed: delete its timers and state."""


class EventTimeTrigger(Trigger[Any, TimeWindow]):
    """Fires once the watermark passes the end of the window."""

    def on_element(
        self, element: Any, timestamp: int, window: TimeWindow, ctx: Any
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: Any) -> None:
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: TimeWindow, ctx: Any) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()


class ProcessingTimeTrigger(Trigger[Any, TimeWindow]):
    """Fires once processing time passes the end of the window."""

    def on_element(
        self, element: Any, timestamp: int, window: TimeWindow, ctx: Any
    ) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        return TriggerResult.FIRE

    def on_event_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: Any) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: TimeWindow, ctx: Any) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()


def _min(a: int, b: int) -> int:
    return min(a, b)


class _ContinuousTrigger(Trigger[Any, TimeWindow]):
    """Shared by the continuous triggers: fires every ``interval`` ms of one time domain."""

    event_time = True

    def __init__(self, interval: int) -> None:
        if interval <= 0:
            raise ValueError(f"The interval of a continuous trigger must be positive: {interval}")
        self.interval = interval
        self.state_desc = ReducingStateDescriptor("fire-time", _min, Types.LONG())

    def _register(self, ctx: Any, time: int) -> None:
        if self.event_time:
            ctx.register_event_time_timer(time)
        else:
            ctx.register_processing_time_timer(time)

    def _register_next(self, time: int, window: TimeWindow, ctx: Any, state: Any) -> None:
        next_fire = min(time + self.interval, window.max_timestamp())
        state.add(next_fire)
        self._register(ctx, next_fire)

    def _on_timer(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_desc)
        if state.get() == time:
            state.clear()
            self._register_next(time, window, ctx, state)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: Any) -> None:
        ctx.merge_partitioned_state(self.state_desc)
        next_fire = ctx.get_partitioned_state(self.state_desc).get()
        if next_fire is not None:
            self._register(ctx, next_fire)

    def clear(self, window: TimeWindow, ctx: Any) -> None:
        state = ctx.get_partitioned_state(self.state_desc)
        timestamp = state.get()
        if timestamp is not None:
            if self.event_time:
                ctx.delete_event_time_timer(timestamp)
            else:
                ctx.delete_processing_time_timer(timestamp)
            state.clear()


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of event time, and at the end of the window."""

    @staticmethod
    def of(interval: Time | int) -> ContinuousEventTimeTrigger:
        return ContinuousEventTimeTrigger(_millis(interval, "interval"))

    def on_element(
        self, element: Any, timestamp: int, window: TimeWindow, ctx: Any
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.state_desc)
        if state.get() is None:
            self._register_next(timestamp - timestamp % self.interval, window, ctx, state)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._on_timer(time, window, ctx)

    def on_processing_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of processing time."""

    event_time = False

    @staticmethod
    def of(interval: Time | int) -> ContinuousProcessingTimeTrigger:
        return ContinuousProcessingTimeTrigger(_millis(interval, "interval"))

    def on_element(
        self, element: Any, timestamp: int, window: TimeWindow, ctx: Any
    ) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_desc)
        now = ctx.get_current_processing_time()
        if state.get() is None:
            self._register_next(now - now % self.interval, window, ctx, state)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        return self._on_timer(time, window, ctx)

    def on_event_time(self, time: int, window: TimeWindow, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE


class PurgingTrigger(Trigger[Any, Any]):
    """Turns every FIRE of the nested trigger into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger[Any, Any]) -> None:
        if not isinstance(nested_trigger, Trigger):
            raise TypeError(
                f"PurgingTrigger.of() takes a Trigger, got {type(nested_trigger).__name__}"
            )
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger[Any, Any]) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Any, ctx: Any) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def clear(self, window: Any, ctx: Any) -> None:
        self.nested_trigger.clear(window, ctx)


def _add(a: int, b: int) -> int:
    return a + b


class CountTrigger(Trigger[Any, Any]):
    """Fires each time the window has received ``count`` more elements (never purges)."""

    def __init__(self, window_size: int) -> None:
        if window_size <= 0:
            raise ValueError(f"CountTrigger needs a positive count, got {window_size}")
        self._window_size = window_size
        self._count_state_descriptor = ReducingStateDescriptor("count", _add, Types.LONG())

    @staticmethod
    def of(window_size: int) -> CountTrigger:
        return CountTrigger(window_size)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        count = ctx.get_partitioned_state(self._count_state_descriptor)
        count.add(1)
        if count.get() >= self._window_size:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        ctx.merge_partitioned_state(self._count_state_descriptor)

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.get_partitioned_state(self._count_state_descriptor).clear()


class NeverTrigger(Trigger[Any, GlobalWindow]):
    """Never fires: the default trigger of ``GlobalWindows``."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Any) -> None:
        pass

    def clear(self, window: Any, ctx: Any) -> None:
        pass


# ---- assigners -------------------------------------------------------------------------------


class WindowAssigner(ABC, Generic[T, W]):
    """Assigns each element to zero or more windows."""

    class WindowAssignerContext(ABC):
        """What ``assign_windows`` may read."""

        @abstractmethod
        def get_current_processing_time(self) -> int: ...

        @abstractmethod
        def get_runtime_context(self) -> Any: ...

    @abstractmethod
    def assign_windows(self, element: T, timestamp: int, context: Any) -> Collection[W]:
        """The windows ``element`` (with ``timestamp``) belongs to."""

    @abstractmethod
    def get_default_trigger(self, env: Any) -> Trigger[T, W]:
        """The trigger used unless ``WindowedStream.trigger`` sets another."""

    def get_window_serializer(self) -> Any:
        """Windows are pickled in state; kept for PyFlink's interface."""
        return None

    @abstractmethod
    def is_event_time(self) -> bool:
        """Whether windows are in event time (late data, cleanup by watermark)."""


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows merge (sessions)."""

    class MergeCallback(ABC, Generic[MW]):
        """Receives each group of windows to merge and its result."""

        @abstractmethod
        def merge(self, to_be_merged: Iterable[MW], merge_result: MW) -> None: ...

    @abstractmethod
    def merge_windows(self, windows: Iterable[W], callback: Any) -> None:
        """Report through ``callback`` which windows merge into which."""


def _check_size(size: int, what: str) -> None:
    if size <= 0:
        raise ValueError(f"{what} must be positive, got {size} ms")


def _assigned_time(event_time: bool, timestamp: int | None, context: Any, what: str) -> int:
    """The time a record is assigned to windows by: its timestamp (event time; refused when
    it has none) or the current processing time."""
    if not event_time:
        return int(context.get_current_processing_time())
    if timestamp is None or timestamp <= MIN_LONG_VALUE:
        raise ValueError(
            f"Record has no timestamp (or MIN_VALUE): event-time {what} need "
            "assign_timestamps_and_watermarks(...) before window(...)"
        )
    return timestamp


class _TimeWindowAssigner(WindowAssigner[Any, TimeWindow]):
    """What the time-window assigners share: they work in event or processing time
    (``event_time``) and fire, by default, when that time passes the window's end."""

    event_time = True

    def get_default_trigger(self, env: Any) -> Trigger[Any, TimeWindow]:
        return EventTimeTrigger() if self.event_time else ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return self.event_time


class _TumblingWindows(_TimeWindowAssigner):
    """Tumbling windows: one window of ``size`` per element, aligned to ``offset``."""

    def __init__(self, size: int, offset: int = 0) -> None:
        _check_size(size, f"The size of {type(self).__name__}")
        if abs(offset) >= size:
            raise ValueError(
                f"{type(self).__name__} parameters must satisfy abs(offset) < size "
                f"(size {size}, offset {offset})"
            )
        self._size = size
        self._offset = offset

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        timestamp = _assigned_time(self.event_time, timestamp, context, "windows")
        start = TimeWindow.get_window_start_with_offset(timestamp, self._offset, self._size)
        return [TimeWindow(start, start + self._size)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._size}, {self._offset})"


class TumblingEventTimeWindows(_TumblingWindows):
    """Fixed-size, non-overlapping event-time windows (optionally shifted by ``offset``)."""

    @staticmethod
    def of(size: Time | int, offset: Time | int | None = None) -> TumblingEventTimeWindows:
        return TumblingEventTimeWindows(_millis(size, "size"), _offset_millis(offset))


class TumblingProcessingTimeWindows(_TumblingWindows):
    """Fixed-size, non-overlapping processing-time windows."""

    event_time = False

    @staticmethod
    def of(size: Time | int, offset: Time | int | None = None) -> TumblingProcessingTimeWindows:
        return TumblingProcessingTimeWindows(_millis(size, "size"), _offset_millis(offset))


class _SlidingWindows(_TimeWindowAssigner):
    """Sliding windows: every window of ``size`` (one per ``slide``) holding the element."""

    def __init__(self, size: int, slide: int, offset: int = 0) -> None:
        _check_size(size, f"The size of {type(self).__name__}")
        _check_size(slide, f"The slide of {type(self).__name__}")
        if abs(offset) >= slide:
            raise ValueError(
                f"{type(self).__name__} parameters must satisfy abs(offset) < slide "
                f"(slide {slide}, offset {offset})"
            )
        self._size = size
        self._slide = slide
        self._offset = offset

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        timestamp = _assigned_time(self.event_time, timestamp, context, "windows")
        windows = []
        last_start = TimeWindow.get_window_start_with_offset(timestamp, self._offset, self._slide)
        start = last_start
        while start > timestamp - self._size:
            windows.append(TimeWindow(start, start + self._size))
            start -= self._slide
        return windows

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._size}, {self._slide}, {self._offset})"


class SlidingEventTimeWindows(_SlidingWindows):
    """Windows of ``size`` starting every ``slide`` (event time); they overlap."""

    @staticmethod
    def of(
        size: Time | int, slide: Time | int, offset: Time | int | None = None
    ) -> SlidingEventTimeWindows:
        return SlidingEventTimeWindows(
            _millis(size, "size"),
            _millis(slide, "slide"),
            _offset_millis(offset),
        )


class SlidingProcessingTimeWindows(_SlidingWindows):
    """Windows of ``size`` starting every ``slide`` (processing time)."""

    event_time = False

    @staticmethod
    def of(
        size: Time | int, slide: Time | int, offset: Time | int | None = None
    ) -> SlidingProcessingTimeWindows:
        return SlidingProcessingTimeWindows(
            _millis(size, "size"),
            _millis(slide, "slide"),
            _offset_millis(offset),
        )


class SessionWindowTimeGapExtractor(ABC):
    """Gives the session gap (ms) of each element (dynamic-gap session windows)."""

    @abstractmethod
    def extract(self, element: Any) -> int:
        """The session gap for ``element``, in ms (positive)."""


class _FunctionGapExtractor(SessionWindowTimeGapExtractor):
    def __init__(self, fn: Callable[[Any], int]) -> None:
        self._fn = fn

    def extract(self, element: Any) -> int:
        return self._fn(element)


class _SessionWindows(_TimeWindowAssigner, MergingWindowAssigner[Any, TimeWindow]):
    """Session windows: one window of the gap per element, merged while they overlap."""

    def __init__(self, session_gap: int = 0, extractor: Any = None) -> None:
        if extractor is None:
            _check_size(session_gap, f"The session gap of {type(self).__name__}")
        elif not isinstance(extractor, SessionWindowTimeGapExtractor):
            if not callable(extractor):
                raise TypeError(
                    "with_dynamic_gap() takes a SessionWindowTimeGapExtractor, got "
                    f"{type(extractor).__name__}"
                )
            extractor = _FunctionGapExtractor(extractor)
        self._session_gap = session_gap
        self._extractor = extractor

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        timestamp = _assigned_time(self.event_time, timestamp, context, "session windows")
        gap = self._session_gap
        if self._extractor is not None:
            gap = self._extractor.extract(element)
            if gap <= 0:
                raise ValueError(f"Dynamic session time gap must be positive, got {gap}")
        return [TimeWindow(timestamp, timestamp + gap)]

    def merge_windows(self, windows: Iterable[TimeWindow], callback: Any) -> None:
        TimeWindow.merge_windows(windows, callback)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._session_gap})"


class EventTimeSessionWindows(_SessionWindows):
    """Event-time sessions: windows that merge while elements are less than a gap apart."""

    @staticmethod
    def with_gap(size: Time | int) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(_millis(size, "gap"))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor,
    ) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(0, extractor)


class ProcessingTimeSessionWindows(_SessionWindows):
    """Processing-time sessions."""

    event_time = False

    @staticmethod
    def with_gap(size: Time | int) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(_millis(size, "gap"))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor,
    ) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(0, extractor)


class DynamicEventTimeSessionWindows(_SessionWindows):
    """Event-time sessions whose gap comes from each element."""

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor,
    ) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(0, extractor)


class DynamicProcessingTimeSessionWindows(_SessionWindows):
    """Processing-time sessions whose gap comes from each element."""

    event_time = False

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor,
    ) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(0, extractor)


class GlobalWindows(WindowAssigner[Any, GlobalWindow]):
    """One window per key holding every element; fires only through a custom trigger."""

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[GlobalWindow]:
        return [GlobalWindow()]

    def get_default_trigger(self, env: Any) -> Trigger[Any, GlobalWindow]:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    def __repr__(self) -> str:
        return "GlobalWindows()"


class CountTumblingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """Windows of ``window_size`` consecutive elements per key (PyFlink's): the n-th element
    goes to ``CountWindow(n // size)``, which fires when full; an incomplete window never
    fires."""

    def __init__(self, window_size: int) -> None:
        if window_size <= 0:
            raise ValueError(f"The size of a count window must be positive, got {window_size}")
        self._window_size = window_size
        self._count_descriptor = ValueStateDescriptor("tumble-count-assigner", Types.LONG())

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[CountWindow]:
        state = context.get_runtime_context().get_state(self._count_descriptor)
        current = state.value() or 0
        state.update(current + 1)
        return [CountWindow(current // self._window_size)]

    def get_default_trigger(self, env: Any) -> Trigger[Any, CountWindow]:
        return PurgingTrigger(CountTrigger(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self._window_size})"


class CountSlidingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """Windows of ``window_size`` elements starting every ``window_slide`` elements per key
    (PyFlink's): window ``i`` holds elements ``i*slide .. i*slide+size-1`` and fires once,
    when full."""

    def __init__(self, window_size: int, window_slide: int) -> None:
        if window_size <= 0 or window_slide <= 0:
            raise ValueError(
                "Size and slide of a count window must be positive, got "
                f"size {window_size}, slide {window_slide}"
            )
        self._window_size = window_size
        self._window_slide = window_slide
        self._count_descriptor = ValueStateDescriptor("slide-count-assigner", Types.LONG())

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[CountWindow]:
        state = context.get_runtime_context().get_state(self._count_descriptor)
        current = state.value() or 0
        state.update(current + 1)
        size, slide = self._window_size, self._window_slide
        last_id = current // slide
        windows = []
        while last_id >= 0 and last_id * slide <= current <= last_id * slide + size - 1:
            windows.append(CountWindow(last_id))
            last_id -= 1
        return windows

    def get_default_trigger(self, env: Any) -> Trigger[Any, CountWindow]:
        return PurgingTrigger(CountTrigger(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self._window_size}, {self._window_slide})"
