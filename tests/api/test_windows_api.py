"""Window assigners, windows, triggers and windowed state without Spark."""

from __future__ import annotations

import os
import pickle
from typing import Any

import pytest

from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common import Time
from sparkpoint.datastream.window import (
    ContinuousEventTimeTrigger,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountWindow,
    EventTimeSessionWindows,
    GlobalWindow,
    GlobalWindows,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TimeWindow,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from sparkpoint.runtime.operators.window_state import WindowedState, WindowScope
from sparkpoint.state.backend import KeyedStateBackendParameters
from sparkpoint.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.functions import AggregateFunction
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index


class _Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def get_current_processing_time(self) -> int:
        return self.now


def test_tumbling_and_sliding_window_starts_with_offset_and_negative_timestamps() -> None:
    tumbling = TumblingEventTimeWindows.of(Time.milliseconds(5), Time.milliseconds(3))
    assert tumbling.assign_windows(None, -4, None) == [TimeWindow(-7, -2)]
    assert tumbling.assign_windows(None, 2, None) == [TimeWindow(-2, 3)]
    assert tumbling.assign_windows(None, 3, None) == [TimeWindow(3, 8)]
    sliding = SlidingEventTimeWindows.of(Time.milliseconds(8), Time.milliseconds(4))
    assert sliding.assign_windows(None, 1, None) == [TimeWindow(0, 8), TimeWindow(-4, 4)]
    assert TimeWindow(0, 8).max_timestamp() == 7
    processing = TumblingProcessingTimeWindows.of(Time.milliseconds(100))
    assert processing.assign_windows(None, None, _Clock(1234)) == [TimeWindow(1200, 1300)]
    assert not processing.is_event_time()


def test_assigner_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="abs\\(offset\\) < size"):
        TumblingEventTimeWindows.of(Time.milliseconds(5), Time.milliseconds(5))
    with pytest.raises(ValueError, match="slide"):
        SlidingEventTimeWindows.of(Time.milliseconds(5), Time.milliseconds(0))
    with pytest.raises(ValueError, match="gap"):
        EventTimeSessionWindows.with_gap(Time.milliseconds(0))
    with pytest.raises(ValueError, match="no timestamp"):
        TumblingEventTimeWindows.of(Time.milliseconds(5)).assign_windows(None, None, None)
    with pytest.raises(TypeError, match="Trigger"):
        PurgingTrigger.of("not a trigger")  # type: ignore[arg-type]


def test_session_windows_merge_touching_and_overlapping_windows() -> None:
    merged: list[tuple[Any, set[TimeWindow]]] = []

    class Callback:
        def merge(self, to_be_merged: Any, merge_result: Any) -> None:
            merged.append((merge_result, set(to_be_merged)))

    windows = [TimeWindow(1, 6), TimeWindow(9, 14), TimeWindow(5, 10), TimeWindow(30, 35)]
    EventTimeSessionWindows.with_gap(Time.milliseconds(5)).merge_windows(windows, Callback())
    assert merged == [(TimeWindow(1, 14), {TimeWindow(1, 6), TimeWindow(5, 10), TimeWindow(9, 14)})]
    merged.clear()
    TimeWindow.merge_windows([TimeWindow(0, 5), TimeWindow(5, 7)], Callback())
    assert merged == [(TimeWindow(0, 7), {TimeWindow(0, 5), TimeWindow(5, 7)})]


def test_windows_are_values_that_pickle() -> None:
    for w in (TimeWindow(-3, 9), CountWindow(4), GlobalWindow()):
        copy = pickle.loads(pickle.dumps(w))
        assert copy == w and hash(copy) == hash(w)
    assert TimeWindow(1, 2) != CountWindow(1)
    assert GlobalWindows.create().assign_windows("x", None, None) == [GlobalWindow()]


class _CountState:
    def __init__(self) -> None:
        self.v: int | None = None

    def value(self) -> int | None:
        return self.v

    def update(self, v: int) -> None:
        self.v = v


class _RuntimeContext:
    def __init__(self) -> None:
        self.state = _CountState()

    def get_state(self, desc: Any) -> _CountState:
        return self.state


class _AssignerContext:
    def __init__(self) -> None:
        self.rc = _RuntimeContext()

    def get_runtime_context(self) -> _RuntimeContext:
        return self.rc


def test_sliding_count_windows_are_pyflinks() -> None:
    """Element n (from 0) of a key belongs to the windows i with i*slide <= n <= i*slide +
    size - 1: with (4, 2) window 0 is elements 0..3, window 1 2..5; no window [0, 1]."""
    assigner = CountSlidingWindowAssigner.of(4, 2)
    ctx = _AssignerContext()
    got = [[w.id for w in assigner.assign_windows(n, None, ctx)] for n in range(7)]
    assert got == [[0], [0], [1, 0], [1, 0], [2, 1], [2, 1], [3, 2]]


def _backend(tmp_path: Any) -> HeapKeyedStateBackend:
    clear_heap_cache()
    rng = compute_key_group_range_for_operator_index(128, 1, 0)
    return HeapKeyedStateBackend(
        KeyedStateBackendParameters(
            "job", "op", 0, 1, 128, rng, os.path.join(str(tmp_path), "a"), SYSTEM_CLOCK, None
        )
    )


class _Sum(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: int, acc: int) -> int:
        return acc + value

    def get_result(self, acc: int) -> str:
        return f"sum={acc}"

    def merge(self, a: int, b: int) -> int:
        return a + b


def test_windowed_state_is_per_key_and_window_and_merges_as_pyflink(tmp_path: Any) -> None:
    """Lists merge completely; reducing and aggregating states keep the first value present
    among target and sources (PyFlink 2.3's merge; the other values are dropped)."""
    backend = _backend(tmp_path)
    scope = WindowScope()
    lists = WindowedState(backend, "l", ListStateDescriptor("l"), scope)
    sums = WindowedState(backend, "r", ReducingStateDescriptor("r", lambda a, b: a + b), scope)
    aggs = WindowedState(backend, "g", AggregatingStateDescriptor("g", _Sum()), scope)
    value = WindowedState(backend, "v", ValueStateDescriptor("v"), scope)
    a, b, c = TimeWindow(0, 5), TimeWindow(4, 9), TimeWindow(8, 12)
    backend.set_current_key("k")
    for window, x in ((a, 1), (a, 2), (b, 10), (c, 100)):
        scope.window = window
        for state in (lists, sums, aggs):
            state.add(x)
    scope.window = a
    value.update("only in a")
    assert (lists.get(), sums.get(), aggs.get(), value.value()) == ([1, 2], 3, "sum=3", "only in a")
    backend.set_current_key("other")
    assert (lists.get(), sums.get(), aggs.get(), value.value()) == ([], None, None, None)
    backend.set_current_key("k")
    for state in (lists, sums, aggs):
        state.merge_namespaces(a, [b, c])
    assert (lists.get(), sums.get(), aggs.get()) == ([1, 2, 10, 100], 3, "sum=3")
    scope.window = b
    assert (lists.get(), sums.get(), aggs.get()) == ([], None, None)
    with pytest.raises(TypeError, match="cannot be merged"):
        value.merge_namespaces(a, [b])


class _TriggerCtx:
    """A trigger context over windowed state of a real heap backend."""

    def __init__(self, backend: Any, watermark: int) -> None:
        self.backend = backend
        self.scope = WindowScope()
        self.watermark = watermark
        self.timers: list[int] = []
        self.states: dict[str, WindowedState] = {}

    def get_current_watermark(self) -> int:
        return self.watermark

    def register_event_time_timer(self, t: int) -> None:
        self.timers.append(t)

    def delete_event_time_timer(self, t: int) -> None:
        self.timers.remove(t)

    def get_partitioned_state(self, desc: Any) -> WindowedState:
        name = desc.get_name()
        if name not in self.states:
            self.states[name] = WindowedState(self.backend, name, desc, self.scope)
        return self.states[name]


def test_continuous_event_time_and_count_triggers(tmp_path: Any) -> None:
    backend = _backend(tmp_path)
    backend.set_current_key("k")
    ctx = _TriggerCtx(backend, watermark=0)
    window = TimeWindow(0, 50)
    ctx.scope.window = window
    trigger = ContinuousEventTimeTrigger.of(Time.milliseconds(10))
    assert trigger.on_element(None, 12, window, ctx) is TriggerResult.CONTINUE
    assert sorted(ctx.timers) == [20, 49]
    assert trigger.on_event_time(20, window, ctx) is TriggerResult.FIRE
    assert sorted(ctx.timers) == [20, 30, 49]  # the next interval (20 was consumed by firing)
    assert trigger.on_event_time(49, window, ctx) is TriggerResult.FIRE
    trigger.clear(window, ctx)
    assert 30 not in ctx.timers
    count = PurgingTrigger.of(CountTrigger.of(2))
    results = [count.on_element(x, 0, window, ctx) for x in range(5)]
    assert results == [TriggerResult.CONTINUE, TriggerResult.FIRE_AND_PURGE] * 2 + [
        TriggerResult.CONTINUE
    ]
