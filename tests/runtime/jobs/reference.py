"""Reference jobs shared by the runtime tests (importable by Spark's Python workers)."""

from __future__ import annotations

import ast
import os
import time
from typing import Any

from sparkpoint.common import Encoder, Types
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import KeyedCoProcessFunction, OutputTag
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.testing import CountAndEcho, FailureInjector, expected_keyed_count_output

SECOND_SIDE = OutputTag("second")
END_OF_INPUT = 2**62  # an event-time timer that fires when the input ends


def counted_pairs(
    env: Any,
    n_events: int,
    n_keys: int,
    injector: FailureInjector | None = None,
    map_injector: FailureInjector | None = None,
) -> Any:
    """numbers -> (x % keys, x) -> key_by -> CountAndEcho: the stream the sink tests write."""

    def to_pair(x: int) -> tuple[int, int]:
        if map_injector is not None:
            map_injector.maybe_fail(x)
        return (x % n_keys, x)

    return (
        env.from_source(NumberSequenceSource(0, n_events - 1), None, "numbers")
        .uid("numbers")
        .map(to_pair)
        .uid("to-pair")
        .key_by(lambda p: p[0])
        .process(CountAndEcho(injector))
        .uid("count")
    )


def keyed_count_job(
    env: Any,
    out_dir: str,
    n_events: int,
    n_keys: int,
    injector: FailureInjector | None = None,
    map_injector: FailureInjector | None = None,
) -> None:
    """numbers -> (x % keys, x) -> key_by -> CountAndEcho -> exactly-once FileSink."""
    (
        counted_pairs(env, n_events, n_keys, injector, map_injector)
        .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def run_until_checkpoints(env: Any, checkpoints: int, name: str) -> list[Any]:
    """Run the job until ``checkpoints`` checkpoints completed, then cancel it; returns the
    statistics of its completed checkpoints, oldest first."""
    client = env.execute_async(name)
    done: list[Any] = []
    deadline = time.time() + 240
    while len(done) < checkpoints:
        assert not client.get_job_execution_result().done(), "the job ended too early"
        assert time.time() < deadline, "no checkpoints before the deadline"
        time.sleep(0.05)
        done = [s for s in client.get_checkpoint_statistics() if s.status == "COMPLETED"]
    client.cancel().result(timeout=120)
    client.wait(timeout=120)
    return [s for s in client.get_checkpoint_statistics() if s.status == "COMPLETED"]


def read_sink(out_dir: str) -> list[tuple[Any, ...]]:
    """Every committed line of the file sink (in-progress files are hidden, not read)."""
    lines: list[tuple[Any, ...]] = []
    if not os.path.isdir(out_dir):
        return lines
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        if name.startswith(".") or os.path.isdir(path):
            continue
        with open(path) as f:
            lines.extend(ast.literal_eval(line) for line in f if line.strip())
    return lines


class CountBothSides(KeyedCoProcessFunction):
    """Keyed state and timers on both inputs: counts records of the first input and sums
    those of the second per key (each echoed, the second also as a side output), and emits
    ``("final", key, count, sum)`` from a timer when the input ends. A timer registered
    from either side is the same timer."""

    def __init__(self, injector: FailureInjector | None = None) -> None:
        self.injector = injector

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.total = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))

    def process_element1(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        yield ("a", ctx.get_current_key(), value)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        if self.injector is not None:
            self.injector.maybe_fail(value)
        self.total.update((self.total.value() or 0) + value)
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        yield ("b", ctx.get_current_key(), value)
        yield SECOND_SIDE, value

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ("final", ctx.get_current_key(), self.count.value() or 0, self.total.value() or 0)


def two_input_job(
    env: Any,
    out_dir: str,
    n_first: int,
    n_second: int,
    n_keys: int,
    injector: FailureInjector | None = None,
) -> None:
    """numbers 0..n_first-1 connected with numbers 0..n_second-1, both keyed by x % n_keys,
    into ``CountBothSides``; main and side output to exactly-once file sinks."""
    first = env.from_source(NumberSequenceSource(0, n_first - 1), None, "first").uid("first")
    second = env.from_source(NumberSequenceSource(0, n_second - 1), None, "second").uid("second")
    keys = n_keys
    both = (
        first.connect(second)
        .key_by(lambda x: x % keys, lambda x: x % keys)
        .process(CountBothSides(injector))
        .uid("both")
    )
    (
        both.sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build()).uid(
            "sink"
        )
    )
    (
        both.get_side_output(SECOND_SIDE)
        .map(lambda x: ("side", x))
        .sink_to(
            FileSink.for_row_format(out_dir + "-side", Encoder.simple_string_encoder()).build()
        )
        .uid("side-sink")
    )


def expected_two_input_output(
    n_first: int, n_second: int, n_keys: int
) -> tuple[list[tuple[Any, ...]], dict[int, tuple[int, int]]]:
    """The echoed records and the final ``(count, sum)`` per key of ``two_input_job``."""
    echoed = sorted(
        [("a", x % n_keys, x) for x in range(n_first)]
        + [("b", x % n_keys, x) for x in range(n_second)]
    )
    finals = {k: (0, 0) for k in range(n_keys)}
    for x in range(n_first):
        c, s = finals[x % n_keys]
        finals[x % n_keys] = (c + 1, s)
    for x in range(n_second):
        c, s = finals[x % n_keys]
        finals[x % n_keys] = (c, s + x)
    return echoed, finals


def check_keyed_count_output(out_dir: str, n_events: int, n_keys: int) -> None:
    """Assert that a keyed count job's sink holds every record once and every key's exact
    final count and sum."""
    recs, finals = expected_keyed_count_output(n_events, n_keys)
    out = read_sink(out_dir)
    echoed = [o for o in out if o[0] == "rec"]
    assert len(echoed) == n_events and set(echoed) == recs
    assert {o[1]: (o[2], o[3]) for o in out if o[0] == "final"} == finals


class NumbersAndTheirTotals(KeyedCoProcessFunction):
    """Input 1: the numbers (echoed, counted); input 2: the running total of their key, as a
    keyed reduce of the same numbers computes it (counted, the largest kept). At the end:
    ``("final", key, numbers, totals, largest total)``."""

    def __init__(self, injector: FailureInjector | None = None) -> None:
        self.injector = injector

    def open(self, runtime_context: Any) -> None:
        self.numbers = runtime_context.get_state(ValueStateDescriptor("numbers", Types.LONG()))
        self.totals = runtime_context.get_state(ValueStateDescriptor("totals", Types.LONG()))
        self.largest = runtime_context.get_state(ValueStateDescriptor("largest", Types.LONG()))

    def process_element1(self, value: Any, ctx: Any) -> Any:
        if self.injector is not None:
            self.injector.maybe_fail(value)
        self.numbers.update((self.numbers.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        yield ("a", ctx.get_current_key(), value)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        self.totals.update((self.totals.value() or 0) + 1)
        self.largest.update(max(self.largest.value() or 0, value[1]))
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (
            "final",
            ctx.get_current_key(),
            self.numbers.value() or 0,
            self.totals.value() or 0,
            self.largest.value() or 0,
        )


def joined_with_own_totals_job(
    env: Any,
    out_dir: str,
    n_events: int,
    n_keys: int,
    injector: FailureInjector | None = None,
) -> None:
    """numbers connected with their own running totals per key (a keyed reduce of the same
    numbers): the graph in which each upstream needs a shuffle of its own."""
    numbers = env.from_source(NumberSequenceSource(0, n_events - 1), None, "numbers")
    keys = n_keys
    totals = (
        numbers.map(lambda x: (x % keys, x))
        .uid("pair")
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("totals")
    )
    (
        numbers.uid("numbers")
        .connect(totals)
        .key_by(lambda x: x % keys, lambda t: t[0])
        .process(NumbersAndTheirTotals(injector))
        .uid("joined")
        .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def expected_joined_with_own_totals(
    n_events: int, n_keys: int
) -> tuple[list[tuple[Any, ...]], dict[int, tuple[int, int, int]]]:
    """The echoed numbers and, per key, (numbers, running totals, final total)."""
    echoed = sorted(("a", x % n_keys, x) for x in range(n_events))
    finals: dict[int, tuple[int, int, int]] = {}
    for x in range(n_events):
        n, t, s = finals.get(x % n_keys, (0, 0, 0))
        finals[x % n_keys] = (n + 1, t + 1, s + x)
    return echoed, finals
