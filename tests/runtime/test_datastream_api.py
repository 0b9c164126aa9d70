"""The DataStream API on Spark: transformations, keyed aggregations with Flink's semantics,
keyed state and timers, state TTL, print format, the execution plan, BATCH mode, errors."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from sparkpoint.common import Configuration, Row, Time, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
    TimeDomain,
)
from sparkpoint.datastream.data_stream import DataStream, KeyedStream
from sparkpoint.datastream.state import (
    ListStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from sparkpoint.errors import JobExecutionError
from sparkpoint.runtime.operators.context import MIN_WATERMARK
from sparkpoint.state.key_groups import assign_to_key_group
from sparkpoint.testing import EpochStart, Faults, ManualClock


def _records_per_epoch(env: StreamExecutionEnvironment, n: int) -> None:
    """Each split yields at most ``n`` records per epoch (so a job runs several epochs)."""
    env.configure(Configuration().set_string("sparkpoint.epoch.max-records-per-split", str(n)))


# ---- map / flat_map / filter ------------------------------------------------------------


class Square(MapFunction):
    def open(self, runtime_context: Any) -> None:
        self.offset = int(runtime_context.get_job_parameter("offset", "0"))

    def map(self, value: int) -> int:
        return value * value + self.offset


class Repeat(FlatMapFunction):
    def flat_map(self, value: int) -> Any:
        for _ in range(value % 3):
            yield value


class Odd(FilterFunction):
    def filter(self, value: int) -> bool:
        return value % 2 == 1


def test_map_flat_map_filter_functions_and_lambdas(env: StreamExecutionEnvironment) -> None:
    env.get_config().set_global_job_parameters({"offset": 1000})
    ds = env.from_source(NumberSequenceSource(1, 10), None, "numbers")
    out = (
        ds.filter(Odd())  # 1 3 5 7 9
        .flat_map(Repeat())  # 1, 5 5, 7, (3 and 9 give nothing)
        .map(Square())
        .map(lambda x: x - 1000)
        .flat_map(lambda x: [x, -x])
        .filter(lambda x: x != -1)
        .execute_and_collect()
    )
    assert sorted(out) == sorted([1, 25, -25, 25, -25, 49, -49])


class WhereAmI(MapFunction):
    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value: int) -> Any:
        return value, self.subtask, self.parallelism


def test_runtime_context_of_a_source_chained_function(env: StreamExecutionEnvironment) -> None:
    # NumberSequenceSource makes one split per subtask: 1..2 and 3..4 at parallelism 2.
    out = env.from_source(NumberSequenceSource(1, 4), None, "numbers").map(WhereAmI())
    assert sorted(out.execute_and_collect()) == [(1, 0, 2), (2, 0, 2), (3, 1, 2), (4, 1, 2)]


# ---- ProcessFunction ---------------------------------------------------------------------


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class Describe(ProcessFunction):
    """Emits each record with its timestamp and the watermark the operator sees."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value[0], ctx.timestamp(), ctx.timer_service().current_watermark()


def test_process_function_sees_timestamps_and_watermark(env: StreamExecutionEnvironment) -> None:
    _records_per_epoch(env, 2)
    ds = env.from_collection([(f"e{i}", 1000 * i) for i in range(1, 7)])
    ds = ds.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(EventTime())
    )
    out = list(ds.process(Describe()).execute_and_collect())
    # Epoch k sees the watermark of epochs < k: max timestamp - 1 (monotonous timestamps).
    assert out == [
        ("e1", 1000, MIN_WATERMARK),
        ("e2", 2000, MIN_WATERMARK),
        ("e3", 3000, 1999),
        ("e4", 4000, 1999),
        ("e5", 5000, 3999),
        ("e6", 6000, 3999),
    ]


def test_process_function_without_timestamps(env: StreamExecutionEnvironment) -> None:
    out = list(env.from_collection([("x", 0)]).process(Describe()).execute_and_collect())
    assert out == [("x", None, MIN_WATERMARK)]


class TimerInNonKeyed(ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_processing_time_timer(
            ctx.timer_service().current_processing_time() + 10
        )
        yield value


def test_timer_in_non_keyed_process_function_fails_the_job(
    env: StreamExecutionEnvironment,
) -> None:
    env.from_collection([1]).process(TimerInNonKeyed()).print()
    with pytest.raises(
        JobExecutionError, match="Setting timers is only supported on a keyed streams"
    ):
        env.execute("timer-non-keyed")


# ---- union, key_by, reduce ---------------------------------------------------------------


def test_union_of_two_sources_then_key_by_reduce(env: StreamExecutionEnvironment) -> None:
    numbers = env.from_source(NumberSequenceSource(1, 6), None, "numbers")
    words = env.from_collection([10, 20, 30, 40])
    out = list(
        numbers.union(words)
        .map(lambda x: ("even" if x % 2 == 0 else "odd", x))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect()
    )
    assert len(out) == 10  # one rolling value per input record
    finals = {k: max(v for kk, v in out if kk == k) for k, _ in out}
    assert finals == {"odd": 9, "even": 112}


# ---- sum / min / max / min_by / max_by (Flink semantics) ---------------------------------

TUPLES = [("a", 3, "x"), ("b", 5, "y"), ("a", 1, "z"), ("a", 3, "w"), ("b", 7, "v"), ("a", 0, "u")]

# Per key, in input order. sum/min/max change one field of the first record (the other fields
# keep the first record's values); min_by/max_by return a whole record, the first on ties.
EXPECTED = {
    "sum": {"a": [(3, "x"), (4, "x"), (7, "x"), (7, "x")], "b": [(5, "y"), (12, "y")]},
    "min": {"a": [(3, "x"), (1, "x"), (1, "x"), (0, "x")], "b": [(5, "y"), (5, "y")]},
    "max": {"a": [(3, "x"), (3, "x"), (3, "x"), (3, "x")], "b": [(5, "y"), (7, "y")]},
    "min_by": {"a": [(3, "x"), (1, "z"), (1, "z"), (0, "u")], "b": [(5, "y"), (5, "y")]},
    "max_by": {"a": [(3, "x"), (3, "x"), (3, "x"), (3, "x")], "b": [(5, "y"), (7, "v")]},
}


def _per_key(records: list[Any]) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for r in records:
        out.setdefault(r[0], []).append((r[1], r[2]))
    return out


def _aggregate_all(keyed: KeyedStream, fields: dict[str, int | str]) -> dict[str, CollectSink]:
    sinks = {}
    for name, field in fields.items():
        sinks[name] = CollectSink()
        getattr(keyed, name)(field).sink_to(sinks[name])
    return sinks


def test_keyed_aggregations_on_tuples(env: StreamExecutionEnvironment) -> None:
    keyed = env.from_collection(TUPLES).key_by(lambda t: t[0])
    sinks = _aggregate_all(keyed, {n: 1 for n in EXPECTED})
    env.execute("aggregations")
    for name, expected in EXPECTED.items():
        assert all(type(r) is tuple for r in sinks[name].collected), name
        assert _per_key(sinks[name].collected) == expected, name


def test_keyed_aggregations_on_rows_by_name_and_position(
    env: StreamExecutionEnvironment,
) -> None:
    rows = [Row(k=k, v=v, tag=t) for k, v, t in TUPLES]
    keyed = env.from_collection(rows).key_by(lambda r: r.k)
    fields: dict[str, int | str] = {"sum": "v", "min": 1, "max": "v", "min_by": "v", "max_by": 1}
    sinks = _aggregate_all(keyed, fields)
    env.execute("row-aggregations")
    for name, expected in EXPECTED.items():
        got = sinks[name].collected
        assert all(isinstance(r, Row) and r.get_field_names() == ["k", "v", "tag"] for r in got)
        assert _per_key(got) == expected, name


# ---- keyed map / flat_map / filter with keyed state --------------------------------------


class CountPerKey(MapFunction):
    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def map(self, value: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return value[0], n


class PairUp(FlatMapFunction):
    """Emits the key's values in pairs, using ListState as the buffer."""

    def open(self, runtime_context: Any) -> None:
        self.buffer = runtime_context.get_list_state(ListStateDescriptor("buf", Types.INT()))

    def flat_map(self, value: Any) -> Any:
        self.buffer.add(value[1])
        held = list(self.buffer.get())
        if len(held) == 2:
            self.buffer.clear()
            yield value[0], held[0], held[1]


class FirstPerKey(FilterFunction):
    def open(self, runtime_context: Any) -> None:
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.BOOLEAN()))

    def filter(self, value: Any) -> bool:
        if self.seen.value():
            return False
        self.seen.update(True)
        return True


def test_keyed_map_flat_map_filter_use_keyed_state(env: StreamExecutionEnvironment) -> None:
    _records_per_epoch(env, 3)  # state carries over epochs
    data = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("a", 5), ("b", 6), ("a", 7)]
    keyed = env.from_collection(data).key_by(lambda t: t[0])
    counts, pairs, firsts = CollectSink(), CollectSink(), CollectSink()
    keyed.map(CountPerKey()).sink_to(counts)
    keyed.flat_map(PairUp()).sink_to(pairs)
    keyed.filter(FirstPerKey()).sink_to(firsts)
    env.execute("keyed-state")
    assert sorted(counts.collected) == [
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("a", 4),
        ("b", 1),
        ("b", 2),
        ("c", 1),
    ]
    assert sorted(pairs.collected) == [("a", 1, 3), ("a", 5, 7), ("b", 2, 6)]
    assert sorted(firsts.collected) == [("a", 1), ("b", 2), ("c", 4)]


class NonKeyedState(MapFunction):
    def open(self, runtime_context: Any) -> None:
        runtime_context.get_state(ValueStateDescriptor("nope", Types.INT()))

    def map(self, value: Any) -> Any:
        return value


def test_keyed_state_needs_key_by(env: StreamExecutionEnvironment) -> None:
    # A DataStream has no keyed aggregations at all (as in PyFlink) ...
    assert not hasattr(DataStream, "reduce") and not hasattr(DataStream, "sum")
    with pytest.raises(TypeError, match="ProcessFunction"):
        env.from_collection([1]).process(EchoKeyed())  # type: ignore[arg-type]
    # ... and keyed state in a function of a non-keyed stream fails the job clearly.
    env.from_collection([1]).map(NonKeyedState()).print()
    with pytest.raises(JobExecutionError, match=r"call key_by\(\.\.\.\) before this operator"):
        env.execute("keyed-state-without-key-by")


class EchoKeyed(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value


# ---- timers ------------------------------------------------------------------------------


class ProcessingTimeTimeout(KeyedProcessFunction):
    """Registers a processing-time timer 50 ms ahead for every record."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        now = ctx.timer_service().current_processing_time()
        ctx.timer_service().register_processing_time_timer(now + 50)
        yield "element", value[0], value[1]

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        now = ctx.timer_service().current_processing_time()
        is_processing_time = ctx.time_domain() == TimeDomain.PROCESSING_TIME
        yield "timer", ctx.get_current_key(), is_processing_time, timestamp, now


def test_processing_time_timers_fire_in_a_later_epoch(env: StreamExecutionEnvironment) -> None:
    """A processing-time timer fires at the end of the first epoch whose processing time (the
    driver's clock when the epoch starts) reaches it; a timer still pending when the bounded
    input ends is dropped. Flink does the same: after end of input it cancels processing-time
    timers that have not started (FLINK-14231, ``ProcessingTimeServiceImpl`` quiesce)."""
    _records_per_epoch(env, 1)
    clock = ManualClock(1_000_000)
    env.set_clock(clock)
    epochs: list[int] = []

    def advance(event: EpochStart) -> None:  # epoch e runs at 1_000_000 + 100 e
        epochs.append(event.epoch)
        clock.advance(100)

    env.set_fault_injection(Faults().on_epoch_start(advance))
    data = [("a", 1), ("b", 2), ("a", 3)]
    out = list(
        env.from_collection(data)
        .key_by(lambda t: t[0])
        .process(ProcessingTimeTimeout())
        .execute_and_collect()
    )
    assert epochs == [1, 2, 3]
    # Each record registers "now + 50": a's timer (1_000_150) fires at the end of epoch 2
    # (time 1_000_200), b's (1_000_250) at the end of epoch 3; the last record's never does.
    assert Counter(out) == Counter(
        [
            ("element", "a", 1),
            ("element", "b", 2),
            ("element", "a", 3),
            ("timer", "a", True, 1_000_150, 1_000_200),
            ("timer", "b", True, 1_000_250, 1_000_300),
        ]
    )
    assert out.index(("timer", "a", True, 1_000_150, 1_000_200)) > out.index(("element", "a", 1))


class TtlProbe(KeyedProcessFunction):
    """Emits what a 50 ms TTL state, a 51 ms TTL state and a plain state held before the
    record."""

    def open(self, runtime_context: Any) -> None:
        short = ValueStateDescriptor("short", Types.INT())
        short.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(50)).build())
        longer = ValueStateDescriptor("long", Types.INT())
        longer.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(51)).build())
        self.short = runtime_context.get_state(short)
        self.long = runtime_context.get_state(longer)
        self.plain = runtime_context.get_state(ValueStateDescriptor("plain", Types.INT()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value[1], self.short.value(), self.long.value(), self.plain.value()
        for state in (self.short, self.long, self.plain):
            state.update(value[1])


def test_state_ttl_expires_values_between_epochs(env: StreamExecutionEnvironment) -> None:
    """Epochs run 50 ms of processing time apart (the driver's clock, shipped to the tasks):
    a value written in one epoch has expired under a 50 ms TTL in the next, not under 51 ms."""
    _records_per_epoch(env, 1)
    clock = ManualClock(1_000_000)
    env.set_clock(clock)
    env.set_fault_injection(Faults().on_epoch_start(lambda event: clock.advance(50)))
    data = [("k", 1), ("k", 2), ("k", 3)]
    out = list(
        env.from_collection(data).key_by(lambda t: t[0]).process(TtlProbe()).execute_and_collect()
    )
    assert out == [(1, None, None, None), (2, None, 1, 1), (3, None, 2, 2)]


# ---- print -------------------------------------------------------------------------------


def _printed(capsys: Any) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line]


def test_print_format_without_prefix(env: StreamExecutionEnvironment, capsys: Any) -> None:
    env.set_parallelism(1)
    typed = Types.TUPLE([Types.STRING(), Types.INT(), Types.BOOLEAN()])
    ds = env.from_collection([("a", 1, True), ("b", 2, False)], type_info=typed)
    ds.print()
    ds.map(lambda t: Row(t[0], t[1]), output_type=Types.ROW([Types.STRING(), Types.INT()])).print()
    ds.map(lambda t: (t[0], t[1])).print("untyped")
    env.execute("print")
    assert sorted(_printed(capsys)) == sorted(
        [
            "(a,1,true)",
            "(b,2,false)",
            "+I[a,1]",
            "+I[b,2]",
            "untyped> ('a', 1)",
            "untyped> ('b', 2)",
        ]
    )


def test_print_prefix_with_parallelism(env: StreamExecutionEnvironment, capsys: Any) -> None:
    typed = Types.TUPLE([Types.STRING(), Types.INT()])
    keyed = env.from_collection([("a", 1), ("b", 2), ("a", 3)], type_info=typed).key_by(
        lambda t: t[0]
    )
    keyed.reduce(lambda x, y: (x[0], x[1] + y[1])).print()
    keyed.sum(1).print("sums")
    env.execute("print-parallel")
    sub = {k: assign_to_key_group(k, 128) * 2 // 128 + 1 for k in ("a", "b")}
    assert sorted(_printed(capsys)) == sorted(
        [
            f"{sub['a']}> (a,1)",
            f"{sub['b']}> (b,2)",
            f"{sub['a']}> (a,4)",
            f"sums:{sub['a']}> (a,1)",
            f"sums:{sub['b']}> (b,2)",
            f"sums:{sub['a']}> (a,4)",
        ]
    )


# ---- execution plan, collect, BATCH ------------------------------------------------------


def test_execution_plan_json(env: StreamExecutionEnvironment) -> None:
    (
        env.from_collection([1, 2, 3])
        .map(lambda x: (x % 2, x))
        .name("pairs")
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .print()
    )
    plan = json.loads(env.get_execution_plan())
    nodes = {n["contents"]: n for n in plan["nodes"]}
    assert nodes["Collection Source"]["pact"] == "Data Source"
    assert nodes["Print to Std. Out"]["pact"] == "Data Sink"
    assert nodes["pairs"]["pact"] == "Operator"
    assert [p["ship_strategy"] for p in nodes["pairs"]["predecessors"]] == ["FORWARD"]
    reduce = nodes["Reduce"]
    assert reduce["parallelism"] == 2
    assert [p["ship_strategy"] for p in reduce["predecessors"]] == ["HASH"]
    ids = {n["id"] for n in plan["nodes"]}
    assert all(p["id"] in ids for n in plan["nodes"] for p in n.get("predecessors", []))
    # The plan is a view: the dataflow is still there to execute afterwards.
    assert json.loads(env.get_execution_plan()) == plan


def test_execute_and_collect_with_limit(env: StreamExecutionEnvironment) -> None:
    ds = env.from_collection(list(range(20))).map(lambda x: x * 3)
    # As in PyFlink: with a limit, a list of the first records.
    assert ds.execute_and_collect("limited", limit=4) == [0, 3, 6, 9]
    typed = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
    projected = env.from_collection([("a", 1, 10), ("b", 2, 20)], type_info=typed).project(2, 0)
    with projected.execute_and_collect() as it:
        assert list(it) == [(10, "a"), (20, "b")]


def test_batch_mode_reduce_emits_only_final_values(env: StreamExecutionEnvironment) -> None:
    env.configure(
        Configuration()
        .set_string("execution.runtime-mode", "BATCH")
        .set_string("sparkpoint.epoch.max-records-per-split", "2")
    )
    data = [("a", 1), ("b", 2), ("a", 3), ("b", 4), ("c", 5), ("a", 6)]
    keyed = env.from_collection(data).key_by(lambda t: t[0])
    reduced, summed = CollectSink(), CollectSink()
    keyed.reduce(lambda x, y: (x[0], x[1] + y[1])).sink_to(reduced)
    keyed.max_by(1).sink_to(summed)
    env.execute("batch")
    assert sorted(reduced.collected) == [("a", 10), ("b", 6), ("c", 5)]
    assert sorted(summed.collected) == [("a", 6), ("b", 4), ("c", 5)]
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    streamed = (
        env.from_collection(data).key_by(lambda t: t[0]).reduce(lambda x, y: (x[0], x[1] + y[1]))
    )
    assert len(list(streamed.execute_and_collect())) == len(data)


# ---- API errors --------------------------------------------------------------------------


def test_api_errors(env: StreamExecutionEnvironment) -> None:
    ds = env.from_collection([1, 2])
    with pytest.raises(TypeError, match="sink_to\\(\\) takes a Sink"):
        ds.sink_to(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="map function must be a callable"):
        ds.map(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected an integer >= 1"):
        env.set_parallelism(0)
    with pytest.raises(ValueError, match="at least 1"):
        ds.map(lambda x: x).set_parallelism(0)
    with pytest.raises(ValueError, match="maxParallelism is out of bounds"):
        env.set_max_parallelism(32768)
    with pytest.raises(TypeError, match="KeyedProcessFunction"):
        ds.key_by(lambda x: x).process(lambda x: x)  # type: ignore[arg-type]


def test_execute_without_sinks_fails(env: StreamExecutionEnvironment) -> None:
    env.from_collection([1, 2]).map(lambda x: x)
    with pytest.raises(RuntimeError, match=re.escape("No operators defined in streaming topology")):
        env.execute("nothing")
    with pytest.raises(RuntimeError, match="No operators defined"):
        env.get_execution_plan()


def test_source_parallelism_sets_the_number_of_splits(env: Any) -> None:
    """``from_source(...).set_parallelism(n)`` reads the sequence in n splits (n tasks)."""
    ds = env.from_source(NumberSequenceSource(1, 100), None, "seq").set_parallelism(4)
    ds.map(lambda x: x * 2).sink_to(sink := CollectSink())
    client = env.execute_async("splits")
    client.wait()
    assert sorted(sink.collected) == [2 * x for x in range(1, 101)]
    (enum,) = client.job_master.split_enumerators().values()
    assert len(enum.splits) == 4
