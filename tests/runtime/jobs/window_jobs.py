"""A windowed reference job for the runtime tests, and what it must output (computed here
without Spark). Importable by Spark's Python workers.

Input: ``x`` in ``0..n-1`` from one source split, minus ``x % 1000`` in ``[700, 760)``
(gaps in event time, so sessions end), as events ``(key, ts, x)`` with ``key = x % KEYS``
and ``ts`` = ``x`` with every block of ``BLOCK`` numbers reversed (out of order by less than
``BLOCK``; the watermark allows ``OUT_OF_ORDERNESS``, so no record is late). Each block's
records of a key arrive in falling time order, so a later record bridges two sessions that
exist already. Four windowed branches on one keyed stream, each to its own exactly-once
file sink:

- tumbling event-time windows of 100 ms, reduce to (count, sum) + window function;
- sliding event-time windows of 100 ms every 40 ms, aggregate (count, sum);
- event-time sessions with a gap of ``GAP`` ms, process window function (list contents);
- count windows of 50 records, reduce to (count, sum) + process window function.

A ``FailingTrigger`` around each branch's trigger calls the injector with ``x`` of every
element, so faults hit the window operator itself.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.common import Duration, Encoder, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import AggregateFunction, ProcessWindowFunction
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.window import (
    CountTrigger,
    EventTimeSessionWindows,
    EventTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    Trigger,
    TumblingEventTimeWindows,
)
from sparkpoint.testing import FailureInjector

KEYS = 5
BLOCK = 10
OUT_OF_ORDERNESS = 2 * BLOCK
GAP = 8
TUMBLE = 100
SLIDE_SIZE, SLIDE = 100, 40
COUNT = 50
KINDS = ("tumbling", "sliding", "session", "count")


def kept(x: int) -> bool:
    return not 700 <= x % 1000 < 760


def event_time(x: int) -> int:
    return BLOCK * (x // BLOCK) + (BLOCK - 1 - x % BLOCK)


def to_event(x: int) -> tuple[int, int, int]:
    return (x % KEYS, event_time(x), x)


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class FailingTrigger(Trigger):
    """``inner``, but first asks the injector about every element's ``x``."""

    def __init__(self, inner: Trigger, injector: FailureInjector | None) -> None:
        self.inner = inner
        self.injector = injector

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> Any:
        if self.injector is not None:
            self.injector.maybe_fail(element[2])
        return self.inner.on_element(element, timestamp, window, ctx)

    def on_event_time(self, time: int, window: Any, ctx: Any) -> Any:
        return self.inner.on_event_time(time, window, ctx)

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> Any:
        return self.inner.on_processing_time(time, window, ctx)

    def can_merge(self) -> bool:
        return self.inner.can_merge()

    def on_merge(self, window: Any, ctx: Any) -> None:
        self.inner.on_merge(window, ctx)

    def clear(self, window: Any, ctx: Any) -> None:
        self.inner.clear(window, ctx)


def add_counts(a: Any, b: Any) -> tuple[int, int, int]:
    """(key, count, sum) of two events or partial results; events count 1 and add ``x``."""
    ca = a[3] if len(a) == 4 else 1
    cb = b[3] if len(b) == 4 else 1
    return (a[0], a[1], a[2] + b[2], ca + cb)  # type: ignore[return-value]


class CountSum(AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: Any, acc: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + 1, acc[1] + value[2])

    def get_result(self, acc: tuple[int, int]) -> tuple[int, int]:
        return acc

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


class Describe(ProcessWindowFunction):
    """``(kind, key, start, end, count, sum)``; for count windows start is the window id and
    end None. Contents are events, or one pre-aggregated ``(key, ts, sum, count)`` or
    ``(count, sum)``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        items = list(elements)
        if self.kind == "sliding":
            count, total = items[0]
        elif self.kind == "session":
            count, total = len(items), sum(e[2] for e in items)
        else:
            first = items[0]
            count = first[3] if len(first) == 4 else 1
            total = first[2]
        w = context.window()
        if self.kind == "count":
            yield (self.kind, key, w.id, None, count, total)
        else:
            yield (self.kind, key, w.start, w.end, count, total)


def windowed_job(
    env: Any, out_root: str, n_events: int, injector: FailureInjector | None = None
) -> None:
    """The four windowed branches; sink ``kind`` writes to ``out_root/kind``."""
    events = (
        env.from_source(NumberSequenceSource(0, n_events - 1), None, "numbers")
        .set_parallelism(1)
        .uid("numbers")
        .filter(kept)
        .uid("kept")
        .map(to_event)
        .uid("events")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_bounded_out_of_orderness(
                Duration.of_millis(OUT_OF_ORDERNESS)
            ).with_timestamp_assigner(EventTime())
        )
        .uid("timestamps")
    )
    keyed = events.key_by(lambda e: e[0])
    branches = {
        "tumbling": keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(TUMBLE)))
        .trigger(FailingTrigger(EventTimeTrigger.create(), injector))
        .reduce(add_counts, window_function=Describe("tumbling")),
        "sliding": keyed.window(
            SlidingEventTimeWindows.of(Time.milliseconds(SLIDE_SIZE), Time.milliseconds(SLIDE))
        )
        .trigger(FailingTrigger(EventTimeTrigger.create(), injector))
        .aggregate(CountSum(), window_function=Describe("sliding")),
        "session": keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
        .trigger(FailingTrigger(EventTimeTrigger.create(), injector))
        .process(Describe("session")),
        "count": keyed.count_window(COUNT)
        .trigger(FailingTrigger(PurgingTrigger.of(CountTrigger.of(COUNT)), injector))
        .reduce(add_counts, window_function=Describe("count")),
    }
    for kind, stream in branches.items():
        stream.uid(f"window-{kind}").sink_to(
            FileSink.for_row_format(f"{out_root}/{kind}", Encoder.simple_string_encoder()).build()
        ).uid(f"sink-{kind}")


def expected_output(n_events: int) -> dict[str, list[tuple[Any, ...]]]:
    """What each branch must output (sorted), computed directly from the input."""
    events = [to_event(x) for x in range(n_events) if kept(x)]
    out: dict[str, list[tuple[Any, ...]]] = {}

    acc: dict[tuple[int, int], list[int]] = {}
    for key, ts, x in events:
        start = ts - ts % TUMBLE
        c = acc.setdefault((key, start), [0, 0])
        c[0] += 1
        c[1] += x
    out["tumbling"] = [("tumbling", k, s, s + TUMBLE, c, t) for (k, s), (c, t) in acc.items()]

    acc = {}
    for key, ts, x in events:
        start = ts - ts % SLIDE
        while start > ts - SLIDE_SIZE:
            c = acc.setdefault((key, start), [0, 0])
            c[0] += 1
            c[1] += x
            start -= SLIDE
    out["sliding"] = [("sliding", k, s, s + SLIDE_SIZE, c, t) for (k, s), (c, t) in acc.items()]

    sessions = []
    for key in range(KEYS):
        mine = sorted((ts, x) for k, ts, x in events if k == key)
        start, end, count, total = None, None, 0, 0
        for ts, x in mine:
            if start is not None and ts <= end:  # touching windows merge (end inclusive)
                end = max(end, ts + GAP)
                count += 1
                total += x
                continue
            if start is not None:
                sessions.append(("session", key, start, end, count, total))
            start, end, count, total = ts, ts + GAP, 1, x
        if start is not None:
            sessions.append(("session", key, start, end, count, total))
    out["session"] = sessions

    counts = []
    for key in range(KEYS):
        xs = [x for k, _, x in events if k == key]
        for wid in range(len(xs) // COUNT):
            chunk = xs[wid * COUNT : (wid + 1) * COUNT]
            counts.append(("count", key, wid, None, COUNT, sum(chunk)))
    out["count"] = counts
    return {k: sorted(v, key=repr) for k, v in out.items()}
