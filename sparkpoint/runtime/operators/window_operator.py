"""The window operator: Flink's ``WindowOperator`` (with PyFlink's choices) on keyed state.

Per key it keeps, all as keyed state (see ``window_state``): the contents of each window
(a list, a reduced value or an accumulator), the merging-window set of session windows,
trigger and per-window function state, and which windows wait for which timer. Timers are
the keyed timers of ``KeyedContext``; a timer fires every window registered for its key,
domain and time. Timers fire once per epoch end (a watermark pass): timers registered while
firing wait for the next pass, as in PyFlink.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.operators.chain import KeyedOperator, collect_outputs
from sparkpoint.runtime.operators.context import MAX_WATERMARK, OperatorEnv
from sparkpoint.runtime.operators.time_domain import TimeDomain
from sparkpoint.runtime.operators.window_state import WindowedState, WindowScope, windowed_state
from sparkpoint.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)
from sparkpoint.state.typeinfo import Types

__all__ = ["WindowOperator", "WindowSpec"]

CONTENTS = "_window.contents"
TIMERS = "_window.timers"
MERGING_SET = "_window.merging-set"
TRIGGER_PREFIX = "_window.trigger."
WINDOW_STATE_PREFIX = "_window.state."


@dataclass
class WindowSpec:
    """What ``WindowedStream`` configured: assigner, trigger, contents, function."""

    assigner: Any
    trigger: Any
    window_function: Any  # an InternalWindowFunction (process/clear/open/close)
    contents: str = "list"  # list | reduce | aggregate
    reduce_function: Any = None
    aggregate_function: Any = None
    allowed_lateness: int = 0
    late_tag: Any = None

    def contents_descriptor(self) -> StateDescriptor:
        if self.contents == "reduce":
            return ReducingStateDescriptor(CONTENTS, self.reduce_function, None)
        if self.contents == "aggregate":
            return AggregatingStateDescriptor(CONTENTS, self.aggregate_function, None)
        return ListStateDescriptor(CONTENTS)


class _MergingWindowSet:
    """Session windows of one key and the state window holding each one's contents
    (Flink's ``MergingWindowSet``)."""

    def __init__(self, assigner: Any, state: Any) -> None:
        self._assigner = assigner
        self._state = state
        self.mapping: dict[Any, Any] = dict(state.items())
        self._initial = dict(self.mapping)

    def persist(self) -> None:
        if self.mapping != self._initial:
            self._state.clear()
            for window, state_window in self.mapping.items():
                self._state.put(window, state_window)
            self._initial = dict(self.mapping)

    def get_state_window(self, window: Any) -> Any:
        return self.mapping.get(window)

    def retire_window(self, window: Any) -> None:
        if window not in self.mapping:
            raise RuntimeError(f"Window {window} is not in the in-flight window set.")
        del self.mapping[window]

    def add_window(self, new_window: Any, merge: Any) -> Any:
        """Add ``new_window``, merging it (and others) as the assigner says; returns the
        window that now holds it. ``merge(result, merged, state_window, merged_states)``."""
        results: dict[Any, Any] = {}

        class _Callback:
            def merge(self, to_be_merged: Any, merge_result: Any) -> None:
                results[merge_result] = to_be_merged

        self._assigner.merge_windows([*self.mapping, new_window], _Callback())
        result_window = new_window
        merged_new = False
        for merge_result, merged_windows in results.items():
            if new_window in merged_windows:
                merged_new = True
                merged_windows.remove(new_window)
                result_window = merge_result
            state_window = self.mapping[next(iter(merged_windows))]
            merged_states = [self.mapping.pop(w) for w in list(merged_windows) if w in self.mapping]
            self.mapping[merge_result] = state_window
            merged_states.remove(state_window)
            if not (merge_result in merged_windows and len(merged_windows) == 1):
                merge(merge_result, merged_windows, self.mapping[merge_result], merged_states)
        if not results or (result_window == new_window and not merged_new):
            self.mapping[result_window] = result_window
        return result_window


class _TriggerContext:
    """``Trigger.TriggerContext`` / ``OnMergeContext`` for the current key and window."""

    def __init__(self, op: WindowOperator) -> None:
        self._op = op
        self.window: Any = None
        self.merged_windows: Any = None
        self._cache: dict[str, WindowedState] = {}
        self._scope = WindowScope()

    def get_current_processing_time(self) -> int:
        return self._op.env.clock.now_ms()

    def get_metric_group(self) -> Any:
        return self._op.runtime_context.get_metrics_group()

    def get_current_watermark(self) -> int:
        return self._op.env.watermark

    def register_processing_time_timer(self, time: int) -> None:
        self._op.register_timer(TimeDomain.PROCESSING_TIME, time, self.window)

    def register_event_time_timer(self, time: int) -> None:
        self._op.register_timer(TimeDomain.EVENT_TIME, time, self.window)

    def delete_processing_time_timer(self, time: int) -> None:
        self._op.delete_timer(TimeDomain.PROCESSING_TIME, time, self.window)

    def delete_event_time_timer(self, time: int) -> None:
        self._op.delete_timer(TimeDomain.EVENT_TIME, time, self.window)

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> WindowedState:
        self._scope.window = self.window
        return windowed_state(
            self._cache, self._op.backend, TRIGGER_PREFIX, state_descriptor, self._scope
        )

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        if self.merged_windows:
            state = self.get_partitioned_state(state_descriptor)
            state.merge_namespaces(self.window, self.merged_windows)


class _PerWindowStateStore:
    """``window_state()`` of a process window function: keyed state of the key and window."""

    def __init__(self, op: WindowOperator, merging: bool) -> None:
        self._op = op
        self._merging = merging
        self._cache: dict[str, WindowedState] = {}
        self.scope = WindowScope()

    def _state(self, desc: StateDescriptor) -> WindowedState:
        if self._merging:
            raise RuntimeError("Per-window state is not allowed when using merging windows.")
        return windowed_state(self._cache, self._op.backend, WINDOW_STATE_PREFIX, desc, self.scope)

    get_state = get_list_state = get_map_state = _state
    get_reducing_state = get_aggregating_state = _state


class _WindowContext:
    """``ProcessWindowFunction.Context`` for the current key and window."""

    def __init__(self, op: WindowOperator, merging: bool) -> None:
        self._op = op
        self._window: Any = None
        self._store = _PerWindowStateStore(op, merging)

    def set_window(self, window: Any) -> None:
        self._window = window
        self._store.scope.window = window

    def window(self) -> Any:
        return self._window

    def current_processing_time(self) -> int:
        return self._op.env.clock.now_ms()

    def current_watermark(self) -> int:
        return self._op.env.watermark

    def window_state(self) -> _PerWindowStateStore:
        return self._store

    def global_state(self) -> Any:
        return self._op.runtime_context


class _AssignerContext:
    """``WindowAssigner.WindowAssignerContext``."""

    def __init__(self, op: WindowOperator) -> None:
        self._op = op

    def get_current_processing_time(self) -> int:
        return self._op.env.clock.now_ms()

    def get_runtime_context(self) -> Any:
        return self._op.runtime_context


class WindowOperator(KeyedOperator):
    """``window(...)``/``window_all(...)`` followed by reduce/aggregate/apply/process."""

    def __init__(self, operator_id: str, name: str, spec: WindowSpec, key_selector: Any) -> None:
        super().__init__(operator_id, name, spec.window_function, key_selector)
        self.spec = spec
        self.assigner = spec.assigner
        self.trigger = spec.trigger
        self.merging = callable(getattr(spec.assigner, "merge_windows", None))
        self.event_time = bool(spec.assigner.is_event_time())
        self.allowed_lateness = spec.allowed_lateness
        self.num_late_records_dropped = 0

    def late_records_dropped(self) -> int:
        return self.num_late_records_dropped

    def open(self, env: OperatorEnv) -> None:
        super().open(env)
        backend = self.backend
        self.contents_scope = WindowScope()
        self.contents = WindowedState(
            backend, CONTENTS, self.spec.contents_descriptor(), self.contents_scope
        )
        pickled = Types.PICKLED_BYTE_ARRAY()
        self.timers = backend.get_partitioned_state(MapStateDescriptor(TIMERS, pickled, pickled))
        self.merging_state = (
            backend.get_partitioned_state(MapStateDescriptor(MERGING_SET, pickled, pickled))
            if self.merging
            else None
        )
        self.trigger_ctx = _TriggerContext(self)
        self.window_ctx = _WindowContext(self, self.merging)
        self.assigner_ctx = _AssignerContext(self)
        self.current_key: Any = None
        self._out_v: list[Any] = []
        self._out_t: list[int | None] = []

    # -- timers ---------------------------------------------------------------------------
    def register_timer(self, domain: TimeDomain, time: int, window: Any) -> None:
        ts = int(time)
        entry = (domain.value, ts)
        windows = self.timers.get(entry)
        if windows is None:
            self.timers.put(entry, [window])
        elif window not in windows:
            self.timers.put(entry, [*windows, window])
        else:
            return
        if domain is TimeDomain.EVENT_TIME:
            self.ctx.register_event_time_timer(ts)
        else:
            self.ctx.register_processing_time_timer(ts)

    def delete_timer(self, domain: TimeDomain, time: int, window: Any) -> None:
        ts = int(time)
        entry = (domain.value, ts)
        windows = self.timers.get(entry)
        if windows is None or window not in windows:
            return
        rest = [w for w in windows if w != window]
        if rest:
            self.timers.put(entry, rest)
            return
        self.timers.remove(entry)
        if domain is TimeDomain.EVENT_TIME:
            self.ctx.delete_event_time_timer(ts)
        else:
            self.ctx.delete_processing_time_timer(ts)

    def _cleanup_time(self, window: Any) -> int:
        if self.event_time:
            cleanup = window.max_timestamp() + self.allowed_lateness
            return cleanup if cleanup >= window.max_timestamp() else MAX_WATERMARK
        return int(window.max_timestamp())

    def _register_cleanup_timer(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup >= MAX_WATERMARK:
            return
        domain = TimeDomain.EVENT_TIME if self.event_time else TimeDomain.PROCESSING_TIME
        self.register_timer(domain, cleanup, window)

    def _delete_cleanup_timer(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup >= MAX_WATERMARK:
            return
        domain = TimeDomain.EVENT_TIME if self.event_time else TimeDomain.PROCESSING_TIME
        self.delete_timer(domain, cleanup, window)

    def _is_window_late(self, window: Any) -> bool:
        return self.event_time and self._cleanup_time(window) <= self.env.watermark

    def _is_element_late(self, timestamp: int | None) -> bool:
        return (
            self.event_time
            and timestamp is not None
            and timestamp + self.allowed_lateness <= self.env.watermark
        )

    # -- elements -------------------------------------------------------------------------
    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        keys, kgs = self._keys(values)
        set_key = self.backend.set_current_key_and_group
        out_v: list[Any] = []
        out_t: list[int | None] = []
        self._out_v, self._out_t = out_v, out_t
        assign = self.assigner.assign_windows
        for i, value in enumerate(values):
            key = keys[i]
            set_key(key, kgs[i])
            self.current_key = key
            ts = None if timestamps is None else timestamps[i]
            windows = assign(value, ts, self.assigner_ctx)
            if self.merging:
                skipped = self._process_merging(value, ts, windows)
            else:
                skipped = self._process_windows(value, ts, windows)
            if skipped and self._is_element_late(ts):
                self._late(value, ts)
        return out_v, out_t

    def _late(self, value: Any, ts: int | None) -> None:
        """A record too late for every window: to the late-data side output, or dropped."""
        tag = self.spec.late_tag
        if tag is None:
            self.num_late_records_dropped += 1
            return
        buf = self.side_buffer.get(tag.tag_id)
        if buf is None:
            buf = self.side_buffer[tag.tag_id] = ([], [])
        buf[0].append(value)
        assert buf[1] is not None
        buf[1].append(ts)

    def _process_windows(self, value: Any, ts: int | None, windows: Iterable[Any]) -> bool:
        skipped = True
        for window in windows:
            if self._is_window_late(window):
                continue
            skipped = False
            self.contents_scope.window = window
            self.contents.add(value)
            self._on_element(value, ts, window, window)
        return skipped

    def _process_merging(self, value: Any, ts: int | None, windows: Iterable[Any]) -> bool:
        merging_set = _MergingWindowSet(self.assigner, self.merging_state)
        skipped = True
        for window in windows:
            actual = merging_set.add_window(window, self._merge)
            if self._is_window_late(actual):
                merging_set.retire_window(actual)
                continue
            skipped = False
            state_window = merging_set.get_state_window(actual)
            if state_window is None:
                raise RuntimeError(f"Window {actual} is not in the in-flight window set.")
            self.contents_scope.window = state_window
            self.contents.add(value)
            self._on_element(value, ts, actual, state_window)
        merging_set.persist()
        return skipped

    def _on_element(self, value: Any, ts: int | None, window: Any, state_window: Any) -> None:
        tctx = self.trigger_ctx
        tctx.window = window
        result = self.trigger.on_element(value, ts, window, tctx)
        if result.is_fire():
            self._fire(window)
        if result.is_purge():
            self.contents_scope.window = state_window
            self.contents.clear()
        self._register_cleanup_timer(window)

    def _merge(
        self,
        merge_result: Any,
        merged_windows: Any,
        state_window: Any,
        merged_state_windows: list[Any],
    ) -> None:
        if self.event_time:
            if merge_result.max_timestamp() + self.allowed_lateness <= self.env.watermark:
                raise RuntimeError(
                    "The end timestamp of an event-time window cannot become earlier than the "
                    f"current watermark by merging. Current watermark: {self.env.watermark} "
                    f"window: {merge_result}"
                )
        else:
            now = self.env.clock.now_ms()
            if merge_result.max_timestamp() <= now:
                raise RuntimeError(
                    "The end timestamp of a processing-time window cannot become earlier than "
                    f"the current processing time by merging. Current processing time: {now} "
                    f"window: {merge_result}"
                )
        tctx = self.trigger_ctx
        tctx.window = merge_result
        tctx.merged_windows = merged_windows
        self.trigger.on_merge(merge_result, tctx)
        tctx.merged_windows = None
        for window in merged_windows:
            tctx.window = window
            self.trigger.clear(window, tctx)
            self._delete_cleanup_timer(window)
        self.contents.merge_namespaces(state_window, merged_state_windows)

    # -- firing ---------------------------------------------------------------------------
    def _fire(self, window: Any) -> None:
        """Evaluate ``window`` (contents in the current scope) if it has contents."""
        stored = self.contents.raw()
        if stored is None:
            return
        kind = self.spec.contents
        if kind == "list":
            contents: list[Any] = list(stored)
        elif kind == "aggregate":
            contents = [self.spec.aggregate_function.get_result(stored)]
        else:
            contents = [stored]
        self.window_ctx.set_window(window)
        out = self.function.process(self.current_key, window, self.window_ctx, contents)
        collect_outputs(out, window.max_timestamp(), self._out_v, self._out_t, self.side_buffer)

    def fire_timers(self) -> None:
        """One pass over the timers due at this epoch's watermark and processing time."""
        due = self.ctx.pop_due_timers()
        if not due:
            return
        self._out_v = []
        self._out_t = []
        set_key = self.backend.set_current_key_and_group
        for ts, domain, key, key_group in due:
            set_key(key, key_group)
            self.current_key = key
            windows = self.timers.get((domain.value, ts))
            if not windows:
                continue
            self.timers.remove((domain.value, ts))
            for window in windows:
                self._on_timer(window, ts, domain)
        if self._out_v:
            self.emit(self._out_v, self._out_t)
        if self.side_buffer:
            self.flush_side_outputs()

    def _on_timer(self, window: Any, ts: int, domain: TimeDomain) -> None:
        merging_set = None
        if self.merging:
            merging_set = _MergingWindowSet(self.assigner, self.merging_state)
            state_window = merging_set.get_state_window(window)
            if state_window is None:
                return  # a timer of a window that was merged away
        else:
            state_window = window
        self.contents_scope.window = state_window
        tctx = self.trigger_ctx
        tctx.window = window
        if domain is TimeDomain.EVENT_TIME:
            result = self.trigger.on_event_time(ts, window, tctx)
        else:
            result = self.trigger.on_processing_time(ts, window, tctx)
        if result.is_fire():
            self._fire(window)
        if result.is_purge():
            self.contents_scope.window = state_window
            self.contents.clear()
        own_domain = TimeDomain.EVENT_TIME if self.event_time else TimeDomain.PROCESSING_TIME
        if domain is own_domain and ts == self._cleanup_time(window):
            self._clear_all_state(window, state_window, merging_set)
        if merging_set is not None:
            merging_set.persist()

    def _clear_all_state(self, window: Any, state_window: Any, merging_set: Any) -> None:
        self.contents_scope.window = state_window
        self.contents.clear()
        tctx = self.trigger_ctx
        tctx.window = window
        self.trigger.clear(window, tctx)
        self.window_ctx.set_window(window)
        self.function.clear(window, self.window_ctx)
        if merging_set is not None:
            merging_set.retire_window(window)
