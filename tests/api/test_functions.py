"""User-function ABCs, wrappers, metric group, and the small time/timer enums and contracts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sparkpoint.datastream import functions as fn
from sparkpoint.datastream.functions import (
    AggregateFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FilterFunctionWrapper,
    FlatMapFunction,
    FlatMapFunctionWrapper,
    Function,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    KeySelectorFunctionWrapper,
    MapFunction,
    MapFunctionWrapper,
    MetricGroup,
    NullByteKeySelector,
    Partitioner,
    PartitionerFunctionWrapper,
    ProcessFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
    RuntimeContext,
)
from sparkpoint.datastream.time_characteristic import TimeCharacteristic
from sparkpoint.datastream.time_domain import TimeDomain
from sparkpoint.datastream.timerservice import TimerService
from sparkpoint.state import functions as state_functions


class Doubler(MapFunction):
    def __init__(self) -> None:
        self.events: list[str] = []

    def open(self, runtime_context: Any) -> None:
        self.events.append(f"open:{runtime_context}")

    def close(self) -> None:
        self.events.append("close")

    def map(self, value: Any) -> Any:
        return value * 2


class Splitter(FlatMapFunction):
    def flat_map(self, value: Any) -> Iterator[str]:
        yield from value.split()


class Even(FilterFunction):
    def filter(self, value: Any) -> bool:
        return value % 2 == 0


class FirstField(KeySelector):
    def get_key(self, value: Any) -> Any:
        return value[0]


class Summer(ReduceFunction):
    def reduce(self, value1: Any, value2: Any) -> Any:
        return value1 + value2


class Modulo(Partitioner):
    def partition(self, key: Any, num_partitions: int) -> int:
        return key % num_partitions


class Average(AggregateFunction):
    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


# ---- wrappers ------------------------------------------------------------------------------


def test_map_wrapper_accepts_lambda_and_instance() -> None:
    wrapped = MapFunctionWrapper(lambda x: x + 1)
    assert isinstance(wrapped, MapFunction)
    assert wrapped.map(1) == 2
    wrapped.open("ctx")  # a plain callable has no lifecycle; this is a no-op
    wrapped.close()
    user = Doubler()
    wrapped = MapFunctionWrapper(user)
    assert wrapped.map(21) == 42
    assert wrapped.wrapped is user
    wrapped.open("ctx")
    wrapped.close()
    assert user.events == ["open:ctx", "close"]


def test_flat_map_wrapper() -> None:
    assert FlatMapFunctionWrapper(lambda s: s.split(",")).flat_map("a,b") == ["a", "b"]
    produced = FlatMapFunctionWrapper(Splitter()).flat_map("to be or")
    assert produced is not None
    assert list(produced) == ["to", "be", "or"]


def test_filter_wrapper() -> None:
    assert FilterFunctionWrapper(lambda x: x > 2).filter(3) is True
    assert FilterFunctionWrapper(lambda x: x).filter(0) is False
    assert [v for v in range(5) if FilterFunctionWrapper(Even()).filter(v)] == [0, 2, 4]


def test_key_selector_wrapper() -> None:
    assert KeySelectorFunctionWrapper(lambda r: r[1]).get_key(("a", 7)) == 7
    assert KeySelectorFunctionWrapper(FirstField()).get_key(("a", 7)) == "a"
    assert NullByteKeySelector().get_key("anything") == 0


def test_reduce_wrapper() -> None:
    assert ReduceFunctionWrapper(lambda a, b: a * b).reduce(6, 7) == 42
    wrapped = ReduceFunctionWrapper(Summer())
    assert isinstance(wrapped, state_functions.ReduceFunction)
    assert wrapped.reduce(40, 2) == 42


def test_partitioner_wrapper() -> None:
    assert PartitionerFunctionWrapper(lambda k, n: k % n).partition(7, 3) == 1
    assert PartitionerFunctionWrapper(Modulo()).partition(8, 3) == 2


def test_wrapper_rejects_wrong_function_type_and_non_callables() -> None:
    with pytest.raises(TypeError, match="MapFunctionWrapper needs a callable or a MapFunction"):
        MapFunctionWrapper(Even())
    with pytest.raises(TypeError, match="FilterFunctionWrapper needs a callable"):
        FilterFunctionWrapper(42)


# ---- abstract methods are enforced --------------------------------------------------------


@pytest.mark.parametrize(
    "cls",
    [
        MapFunction,
        FlatMapFunction,
        FilterFunction,
        KeySelector,
        ReduceFunction,
        AggregateFunction,
        Partitioner,
        CoMapFunction,
        CoFlatMapFunction,
        ProcessFunction,
        KeyedProcessFunction,
        CoProcessFunction,
        KeyedCoProcessFunction,
        RuntimeContext,
        TimerService,
        ProcessFunction.Context,
        KeyedProcessFunction.Context,
        KeyedProcessFunction.OnTimerContext,
        CoProcessFunction.Context,
        KeyedCoProcessFunction.Context,
        KeyedCoProcessFunction.OnTimerContext,
    ],
)
def test_abstract_classes_cannot_be_instantiated(cls: type) -> None:
    with pytest.raises(TypeError, match="abstract"):
        cls()


def test_incomplete_subclass_is_rejected() -> None:
    class HalfCoMap(CoMapFunction):
        def map1(self, value: Any) -> Any:
            return value

    with pytest.raises(TypeError, match="map2"):
        HalfCoMap()  # type: ignore[abstract]


def test_reduce_and_aggregate_are_the_state_package_classes() -> None:
    assert fn.ReduceFunction is state_functions.ReduceFunction
    assert fn.AggregateFunction is state_functions.AggregateFunction
    assert fn.Function is state_functions.Function
    for cls in (MapFunction, ProcessFunction, KeyedProcessFunction, ReduceFunction):
        assert issubclass(cls, Function)
    avg = Average()
    acc = avg.create_accumulator()
    for v in (1, 2, 3, 6):
        acc = avg.add(v, acc)
    assert avg.get_result(acc) == 3


# ---- process functions with concrete contexts ------------------------------------------------


class RecordingTimers(TimerService):
    def __init__(self) -> None:
        self.event_timers: set[int] = set()
        self.processing_timers: set[int] = set()

    def current_processing_time(self) -> int:
        return 1_000

    def current_watermark(self) -> int:
        return 500

    def register_processing_time_timer(self, timestamp: int) -> None:
        self.processing_timers.add(timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self.event_timers.add(timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self.processing_timers.discard(timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self.event_timers.discard(timestamp)


class Ctx(KeyedProcessFunction.OnTimerContext):
    def __init__(self, key: Any, ts: int | None, timers: TimerService) -> None:
        self._key, self._ts, self._timers = key, ts, timers

    def get_current_key(self) -> Any:
        return self._key

    def timer_service(self) -> TimerService:
        return self._timers

    def timestamp(self) -> int | None:
        return self._ts

    def time_domain(self) -> TimeDomain:
        return TimeDomain.EVENT_TIME


class TimeoutFunction(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        ts = ctx.timestamp()
        assert ts is not None
        ctx.timer_service().register_event_time_timer(ts + 100)
        yield (ctx.get_current_key(), value)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        yield (ctx.get_current_key(), "timeout", timestamp, ctx.time_domain())


class NoTimers(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> None:
        return None


def test_keyed_process_function_with_timers() -> None:
    timers = RecordingTimers()
    func = TimeoutFunction()
    ctx = Ctx("k", 40, timers)
    assert list(func.process_element("v", ctx)) == [("k", "v")]
    assert timers.event_timers == {140}
    assert list(func.on_timer(140, ctx)) == [("k", "timeout", 140, TimeDomain.EVENT_TIME)]
    timers.delete_event_time_timer(140)
    assert timers.event_timers == set()


def test_default_on_timer_outputs_nothing() -> None:
    ctx = Ctx("k", None, RecordingTimers())
    assert NoTimers().on_timer(5, ctx) is None


# ---- metrics ----------------------------------------------------------------------------------


def test_metric_group_counts() -> None:
    group = MetricGroup()
    counter = group.counter("records")
    counter.inc()
    counter.inc(4)
    counter.dec(2)
    assert group.counter("records") is counter
    assert counter.get_count() == 3
    meter = group.meter("rate", time_span_in_seconds=10)
    meter.mark_event()
    meter.mark_event(5)
    assert meter.get_count() == 6
    assert meter.time_span_in_seconds == 10
    dist = group.distribution("sizes")
    for v in (5, 1, 9):
        dist.update(v)
    assert (dist.count, dist.sum, dist.min, dist.max) == (3, 15, 1, 9)
    group.gauge("lag", lambda: 7)
    assert group.metrics["lag"]() == 7
    sub = group.add_group("my_group", "value")
    assert sub.get_metric_group_scope() == ("my_group", "value")
    assert group.add_group("my_group", "value") is sub
    assert sub.add_group("inner").get_metric_group_scope() == ("my_group", "value", "inner")


# ---- enums ------------------------------------------------------------------------------------


def test_time_characteristic_and_domain_values() -> None:
    assert [(m.name, m.value) for m in TimeCharacteristic] == [
        ("ProcessingTime", 0),
        ("IngestionTime", 1),
        ("EventTime", 2),
    ]
    assert [(m.name, m.value) for m in TimeDomain] == [("EVENT_TIME", 0), ("PROCESSING_TIME", 1)]
