"""Chained operators that run inside one Spark task, batch at a time.

Operators form a tree per stage: ``push(values, timestamps)`` processes a batch and pushes
the result to every child. Side outputs are a second kind of edge: ``side_children[tag_id]``
receive what a function yields as ``(output_tag, value)`` (``emit_to_tag``).
``end_epoch()`` runs after all input: keyed operators fire due timers there, and leaves
(routers, sinks) emit their output rows. User functions arrive
already wrapped (``map``/``flat_map``/``filter``/``process_element`` methods) by the API layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.runtime.operators.context import (
    KeyedContext,
    OperatorEnv,
    ProcessContext,
    StreamRuntimeContext,
)
from sparkpoint.runtime.operators.time_domain import TimeDomain
from sparkpoint.state.key_groups import key_group_assigner_of

__all__ = [
    "FilterOperator",
    "FlatMapOperator",
    "KeyedOperator",
    "KeyedProcessOperator",
    "MapOperator",
    "Operator",
    "ProcessOperator",
    "ReduceOperator",
    "TimestampsOperator",
    "UserFunctionOperator",
    "collect_outputs",
]

_TIMER_BATCH = 8192  # due timers whose keys' state is prefetched at once
# First elements of a 2-tuple output that cannot be an ``OutputTag`` (checked before the
# attribute lookup: (key, value) pairs are the most common output).
_PLAIN = frozenset({int, str, float, bool, bytes, tuple, type(None)})


class Operator:
    """A node of a stage's operator tree."""

    def __init__(self, operator_id: str, name: str) -> None:
        self.operator_id = operator_id
        self.name = name
        self.children: list[Operator] = []
        # Side outputs: tag id -> the operators reading ``get_side_output(tag)``.
        self.side_children: dict[str, list[Operator]] = {}
        # Side output records of the batch being processed, emitted after its main output.
        self.side_buffer: dict[str, tuple[list[Any], list[int | None] | None]] = {}
        # numRecordsIn / numRecordsOut of this task's run, counted per batch where batches
        # are handed on (``emit``, ``emit_to_tag``, ``StageTree.push_input``).
        self.records_in = 0
        self.records_out = 0

    def all_children(self) -> list[Operator]:
        """Main and side output children."""
        out = list(self.children)
        for side in self.side_children.values():
            out.extend(side)
        return out

    def open(self, env: OperatorEnv) -> None:
        """Called once per task before the first batch."""
        self.env = env
        for child in self.all_children():
            child.open(env)

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        """Process a batch and hand the output to the children."""
        out_values, out_ts = self.process(values, timestamps)
        if out_values:
            self.emit(out_values, out_ts)
        if self.side_buffer:
            self.flush_side_outputs()

    def push_input(self, side: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        """A batch arriving on input ``side`` (two-input operators tell 0 and 1 apart)."""
        self.push(values, timestamps)

    def process(
        self, values: list[Any], timestamps: list[int | None] | None
    ) -> tuple[list[Any], list[int | None] | None]:
        """Transform one batch (identity by default)."""
        return values, timestamps

    def emit(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        """Push a batch to every child."""
        n = len(values)
        self.records_out += n
        for child in self.children:
            child.records_in += n
            child.push(values, timestamps)

    def emit_to_tag(
        self, tag_id: str, values: list[Any], timestamps: list[int | None] | None
    ) -> None:
        """Push a batch to the side output ``tag_id`` (dropped when nothing reads it, as in
        Flink). Operators that produce side outputs themselves (late window data) call it."""
        n = len(values)
        self.records_out += n
        for child in self.side_children.get(tag_id, ()):
            child.records_in += n
            child.push(values, timestamps)

    def flush_side_outputs(self) -> None:
        """Emit what ``collect_outputs`` gathered for side outputs."""
        buffered, self.side_buffer = self.side_buffer, {}
        for tag_id, (values, timestamps) in buffered.items():
            self.emit_to_tag(tag_id, values, timestamps)

    def output_watermark(self, input_watermark: int) -> int:
        """The watermark this operator emits given ``input_watermark`` (the same, unless it
        generates watermarks)."""
        return input_watermark

    def late_records_dropped(self) -> int:
        """Records this operator dropped as late in this task's run (windows)."""
        return 0

    def end_epoch(self) -> None:
        """All input of the epoch was pushed: flush, fire timers, then let children finish."""
        for child in self.all_children():
            child.end_epoch()

    def close(self) -> None:
        """Release resources of this operator and its children."""
        for child in self.all_children():
            child.close()


class UserFunctionOperator(Operator):
    """An operator calling a user ``Function`` (with ``open``/``close``)."""

    def __init__(self, operator_id: str, name: str, function: Any) -> None:
        super().__init__(operator_id, name)
        self.function = function

    def open(self, env: OperatorEnv) -> None:
        self.env = env
        self.runtime_context = StreamRuntimeContext(env, self.name, None, self.operator_id)
        _call_open(self.function, self.runtime_context)
        for child in self.all_children():
            child.open(env)

    def close(self) -> None:
        close = getattr(self.function, "close", None)
        if close is not None:
            close()
        super().close()


def _call_open(function: Any, runtime_context: Any) -> None:
    open_ = getattr(function, "open", None)
    if open_ is not None:
        open_(runtime_context)


class MapOperator(UserFunctionOperator):
    """``map``: one output per input."""

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        f = self.function.map
        return [f(v) for v in values], timestamps


class FilterOperator(UserFunctionOperator):
    """``filter``: keeps the records the predicate accepts."""

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        f = self.function.filter
        if timestamps is None:
            return [v for v in values if f(v)], None
        keep = [(v, t) for v, t in zip(values, timestamps) if f(v)]
        return [v for v, _ in keep], [t for _, t in keep]


def _extend_outputs(
    result: Iterable[Any] | None,
    ts: int | None,
    out_v: list[Any],
    out_t: list[int | None] | None,
) -> None:
    if result is None:
        return
    for item in result:
        out_v.append(item)
        if out_t is not None:
            out_t.append(ts)


def collect_outputs(
    result: Iterable[Any] | None,
    ts: int | None,
    out_v: list[Any],
    out_t: list[int | None] | None,
    side: dict[str, tuple[list[Any], list[int | None] | None]],
) -> None:
    """Append a process function's output: ``(output_tag, value)`` pairs go to ``side``
    (per tag id), everything else to the main output."""
    if result is None:
        return
    for item in result:
        if (
            type(item) is tuple
            and len(item) == 2
            and type(item[0]) not in _PLAIN
            and getattr(type(item[0]), "is_output_tag", False)
        ):
            tag_id = item[0].tag_id
            buf = side.get(tag_id)
            if buf is None:
                buf = side[tag_id] = ([], None if out_t is None else [])
            buf[0].append(item[1])
            if buf[1] is not None:
                buf[1].append(ts)
            continue
        out_v.append(item)
        if out_t is not None:
            out_t.append(ts)


class FlatMapOperator(UserFunctionOperator):
    """``flat_map``: zero or more outputs per input (a generator or any iterable)."""

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        f = self.function.flat_map
        out_v: list[Any] = []
        if timestamps is None:
            for v in values:
                r = f(v)
                if r is not None:
                    out_v.extend(r)
            return out_v, None
        out_t: list[int | None] = []
        for v, t in zip(values, timestamps):
            _extend_outputs(f(v), t, out_v, out_t)
        return out_v, out_t


class ProcessOperator(UserFunctionOperator):
    """``process`` with a (non-keyed) ``ProcessFunction``."""

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        ctx = ProcessContext(self.env)
        f = self.function.process_element
        out_v: list[Any] = []
        out_t: list[int | None] | None = None if timestamps is None else []
        for i, v in enumerate(values):
            ts = None if timestamps is None else timestamps[i]
            ctx.current_timestamp = ts
            collect_outputs(f(v, ctx), ts, out_v, out_t, self.side_buffer)
        return out_v, out_t


class TimestampsOperator(Operator):
    """``assign_timestamps_and_watermarks``: sets record timestamps, tracks the watermark."""

    def __init__(
        self,
        operator_id: str,
        name: str,
        watermark_strategy: Any,
        convert: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        super().__init__(operator_id, name)
        self.strategy = watermark_strategy
        self.assigner = watermark_strategy.get_timestamp_assigner()
        # IngestionTime (common/ingestion_time.py): stamp with the epoch's processing time.
        self.ingestion = getattr(watermark_strategy, "assigns_ingestion_time", False)
        # A typed source stamped at ingestion converts its records first.
        self.convert = convert

    def open(self, env: OperatorEnv) -> None:
        self.generator = self.strategy.create_watermark_generator()
        prev = env.generator_state.get(self.operator_id)
        if prev is not None:
            self.generator.on_event(prev)
        self.max_ts: int | None = prev
        super().open(env)

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        if self.convert is not None:
            values = self.convert(values)
        if self.ingestion:
            return values, [self.env.clock.now_ms()] * len(values)
        assign = self.assigner.extract_timestamp if self.assigner is not None else None
        out_t: list[int | None] = []
        gen = self.generator
        max_ts = self.max_ts
        for i, v in enumerate(values):
            prev = None if timestamps is None else timestamps[i]
            ts = assign(v, prev if prev is not None else -(2**63)) if assign else prev
            out_t.append(ts)
            if ts is not None:
                gen.on_event(ts)
                if max_ts is None or ts > max_ts:
                    max_ts = ts
        self.max_ts = max_ts
        return values, out_t

    def output_watermark(self, input_watermark: int) -> int:
        return int(self.generator.current_watermark())

    def end_epoch(self) -> None:
        if self.ingestion:  # processing time moved on, with or without records
            now = self.env.clock.now_ms()
            self.generator.on_event(now)
            self.max_ts = now if self.max_ts is None else max(self.max_ts, now)
        self.env.report_watermark(self.operator_id, self.generator.current_watermark(), self.max_ts)
        super().end_epoch()


class KeyedOperator(UserFunctionOperator):
    """Base of operators after a ``key_by``: one keyed state backend per operator."""

    def __init__(self, operator_id: str, name: str, function: Any, key_selector: Any) -> None:
        super().__init__(operator_id, name, function)
        self.key_selector = key_selector

    def open(self, env: OperatorEnv) -> None:
        self.env = env
        self.backend = env.keyed_backend(self.operator_id)
        self.ctx = self.make_context(env)
        self.runtime_context = StreamRuntimeContext(env, self.name, self.backend, self.operator_id)
        _call_open(self.function, self.runtime_context)
        for child in self.all_children():
            child.open(env)

    def make_context(self, env: OperatorEnv) -> KeyedContext:
        """The context of ``process_element`` and ``on_timer`` (keyed timers)."""
        return KeyedContext(env, self.backend, self.operator_id)

    def end_epoch(self) -> None:
        self.fire_timers()
        super().end_epoch()

    def _keys(self, values: list[Any]) -> tuple[list[Any], list[int]]:
        """The batch's keys and key groups (vectorised murmur hash for int keys); a backend
        with batched reads reads the batch's state now (``prefetch``)."""
        get_key = self.key_selector.get_key
        keys = [get_key(v) for v in values]
        backend = self.backend
        assigner = key_group_assigner_of(self.key_selector)
        groups = assigner.int64_key_groups(keys, self.env.max_parallelism)
        if groups is not None:
            kgs: list[int] = groups.tolist()
        else:
            key_group_of = backend.key_group_of
            kgs = [key_group_of(k) for k in keys]
        if backend.batched_reads:
            backend.prefetch(keys, kgs)
        return keys, kgs

    def fire_timers(self) -> None:
        """Fire event-time timers up to the watermark and due processing-time timers."""
        on_timer = getattr(self.function, "on_timer", None)
        backend = self.backend
        set_key = backend.set_current_key_and_group
        prefetch = backend.batched_reads and on_timer is not None
        ctx = self.ctx
        enter = ctx.enter_timer
        # Timers registered while firing may be due too: fire until none is (bounded).
        for _round in range(1000):
            due = self.ctx.pop_due_timers()
            if not due:
                return
            out_v: list[Any] = []
            out_t: list[int | None] = []
            side = self.side_buffer  # a new dict after each flush
            for start in range(0, len(due), _TIMER_BATCH):
                chunk = due[start : start + _TIMER_BATCH]
                if prefetch:
                    backend.prefetch([t[2] for t in chunk], [t[3] for t in chunk])
                for ts, domain, key, kg in chunk:
                    set_key(key, kg)
                    enter(ts, domain, key)
                    if on_timer is not None:
                        result = on_timer(ts, ctx)
                        if result is not None:
                            # Output of processing-time timers carries no timestamp (Flink).
                            out_ts = ts if domain is TimeDomain.EVENT_TIME else None
                            collect_outputs(result, out_ts, out_v, out_t, side)
            ctx.leave_timer()
            if out_v:
                self.emit(out_v, out_t)
            if self.side_buffer:
                self.flush_side_outputs()


class KeyedProcessOperator(KeyedOperator):
    """``process`` on a keyed stream (``KeyedProcessFunction``), and keyed map/flat_map/filter."""

    def __init__(
        self,
        operator_id: str,
        name: str,
        function: Any,
        key_selector: Any,
        call: Callable[[Any, Any, Any], Iterable[Any] | None] | None = None,
    ) -> None:
        super().__init__(operator_id, name, function, key_selector)
        self.call = call

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        keys, kgs = self._keys(values)
        ctx = self.ctx
        fn = self.function
        call = self.call
        element = fn.process_element if call is None else (lambda v, c: call(fn, v, c))
        set_key = self.backend.set_current_key_and_group
        side = self.side_buffer
        out_v: list[Any] = []
        out_t: list[int | None] | None = None if timestamps is None else []
        for i, v in enumerate(values):
            key = keys[i]
            set_key(key, kgs[i])
            ts = None if timestamps is None else timestamps[i]
            ctx.current_key = key
            ctx.current_timestamp = ts
            result = element(v, ctx)
            if result is not None:
                collect_outputs(result, ts, out_v, out_t, side)
        return out_v, out_t


class ReduceOperator(KeyedOperator):
    """``reduce``/``sum``/``min``/``max`` on a keyed stream: a rolling aggregate per key.

    In STREAMING mode every update is emitted; in BATCH mode only the final value per key,
    when the input ends (as Flink does).
    """

    def __init__(
        self,
        operator_id: str,
        name: str,
        function: Any,
        key_selector: Any,
        batch_mode: bool,
    ) -> None:
        super().__init__(operator_id, name, function, key_selector)
        self.batch_mode = batch_mode

    def open(self, env: OperatorEnv) -> None:
        super().open(env)
        from sparkpoint.state.descriptors import ValueStateDescriptor
        from sparkpoint.state.typeinfo import Types

        self.state = self.backend.get_partitioned_state(
            ValueStateDescriptor("_reduce", Types.PICKLED_BYTE_ARRAY())
        )

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        keys, kgs = self._keys(values)
        set_key = self.backend.set_current_key_and_group
        reduce = self.function.reduce
        state = self.state
        out_v: list[Any] = []
        for i, v in enumerate(values):
            set_key(keys[i], kgs[i])
            old = state.value()
            new = v if old is None else reduce(old, v)
            state.update(new)
            out_v.append(new)
        if self.batch_mode:
            return [], None
        return out_v, timestamps

    def end_epoch(self) -> None:
        if self.batch_mode and self.env.end_of_input:
            out: list[Any] = []
            for key in list(self.backend.get_keys("_reduce")):
                self.backend.set_current_key(key)
                out.append(self.state.value())
            if out:
                self.emit(out, None)
        super().end_epoch()
