"""PyFlink's documented DataStream examples, with only the import prefix changed."""

from __future__ import annotations

from typing import Any

from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.common.typeinfo import Types
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream.functions import KeyedProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ValueStateDescriptor

STATE_ACCESS_INPUT = [
    ("Alice", 110.1),
    ("Bob", 30.2),
    ("Alice", 20.0),
    ("Bob", 53.1),
    ("Alice", 13.1),
    ("Bob", 3.1),
    ("Bob", 16.1),
    ("Alice", 20.1),
]


class Sum(KeyedProcessFunction):
    """pyflink/examples/datastream/state_access.py."""

    def __init__(self) -> None:
        self.state: Any = None

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(
            ValueStateDescriptor("state", Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: Any, ctx: Any) -> Any:
        current = self.state.value()
        if current is None:
            current = 0
        current += value[1]
        self.state.update(current)
        yield value[0], current


def test_state_access_example(env: Any) -> None:
    ds = env.from_collection(STATE_ACCESS_INPUT)
    out = list(ds.key_by(lambda value: value[0]).process(Sum()).execute_and_collect())
    alice = [round(v, 6) for k, v in out if k == "Alice"]
    bob = [round(v, 6) for k, v in out if k == "Bob"]
    # Per key, the running sums in input order (as PyFlink prints them).
    assert alice == [110.1, 130.1, 143.2, 163.3]
    assert bob == [30.2, 83.3, 86.4, 102.5]


class TimerSum(KeyedProcessFunction):
    """pyflink/examples/datastream/event_time_timer.py."""

    def __init__(self) -> None:
        self.state: Any = None

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(
            ValueStateDescriptor("state", Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: Any, ctx: Any) -> None:
        current = self.state.value()
        if current is None:
            current = 0
        current += value[2]
        self.state.update(current)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 2000)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ctx.get_current_key(), self.state.value()


class MyTimestampAssigner(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[0])


def test_event_time_timer_example(env: Any) -> None:
    ds = env.from_collection(
        [
            (1000, "Alice", 110.1),
            (4000, "Bob", 30.2),
            (3000, "Alice", 20.0),
            (2000, "Bob", 53.1),
            (5000, "Alice", 13.1),
            (3000, "Bob", 3.1),
            (7000, "Bob", 16.1),
            (10000, "Alice", 20.1),
        ]
    )
    ds = ds.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_seconds(2)
        ).with_timestamp_assigner(MyTimestampAssigner())
    )
    out = list(ds.key_by(lambda value: value[1]).process(TimerSum()).execute_and_collect())
    # The whole collection is one epoch, so every timer fires once the input ends, each
    # seeing its key's final sum: one output per registered timer timestamp per key.
    alice = sorted(round(v, 6) for k, v in out if k == "Alice")
    bob = sorted(round(v, 6) for k, v in out if k == "Bob")
    assert alice == [163.3] * 4
    assert bob == [102.5] * 4


WORDS = [
    "To be, or not to be,--that is the question:--",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune",
    "Or to take arms against a sea of troubles,",
]


def _expected_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in WORDS:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    return counts


def test_word_count_batch_mode(env: Any) -> None:
    from sparkpoint.datastream import RuntimeExecutionMode

    env.set_runtime_mode(RuntimeExecutionMode.BATCH)

    def split(line: str) -> Any:
        yield from line.split()

    ds = (
        env.from_collection(WORDS)
        .flat_map(split)
        .map(lambda i: (i, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda i: i[0])
        .reduce(lambda i, j: (i[0], i[1] + j[1]))
    )
    out = list(ds.execute_and_collect())
    # BATCH mode: exactly one final count per word.
    assert dict(out) == _expected_counts()
    assert len(out) == len(_expected_counts())


def test_streaming_word_count_emits_every_update(env: Any) -> None:
    ds = (
        env.from_collection(WORDS)
        .flat_map(lambda line: line.split())
        .map(lambda w: (w, 1))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    out = list(ds.execute_and_collect())
    expected = _expected_counts()
    assert len(out) == sum(expected.values())
    final: dict[str, int] = {}
    for w, c in out:
        final[w] = max(final.get(w, 0), c)
    assert final == expected
