"""The ``timers`` case: N records that each update state and emit, against N records that
each register an event-time timer whose firing reads the state and emits."""

from __future__ import annotations

import os
from typing import Any

from keyed_count.harness import emit
from keyed_count.job import run_sparkpoint
from sparkpoint.datastream.functions import KeyedProcessFunction


class EmitPerRecord(KeyedProcessFunction):
    """Timers case, records side: counts per key and emits (key, record) per record."""

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.common.typeinfo import Types
        from sparkpoint.datastream.state import ValueStateDescriptor

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        c = self.count.value() or 0
        self.count.update(c + 1)
        yield value[0], value[2]


class EmitPerTimer(EmitPerRecord):
    """Timers case, timers side: counts per key, registers one event-time timer per record
    (its number), and emits (key, timer) when the timer fires."""

    def process_element(self, value: Any, ctx: Any) -> None:
        c = self.count.value() or 0
        self.count.update(c + 1)
        ctx.timer_service().register_event_time_timer(value[2])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        if self.count.value():
            yield ctx.get_current_key(), timestamp


def run_timers_case(
    spark: Any, n: int, keys: int, backend: str, work: str, records_per_split: int
) -> dict[str, Any]:
    """N records emitting per record vs N records emitting per fired timer."""
    records = run_sparkpoint(
        spark,
        n,
        keys,
        backend,
        False,
        os.path.join(work, "rec"),
        records_per_split,
        function=EmitPerRecord(),
    )
    timers = run_sparkpoint(
        spark,
        n,
        keys,
        backend,
        False,
        os.path.join(work, "tim"),
        records_per_split,
        function=EmitPerTimer(),
    )
    extra = timers["seconds"] - records["seconds"]
    return {
        "records_seconds": records["seconds"],
        "timers_seconds": timers["seconds"],
        "exact": records["exact"] and timers["exact"],
        "timer_extra_seconds": round(extra, 3),
        "timer_cost_over_record_cost": round(extra / records["seconds"], 3),
    }


def run(spark: Any, args: Any, work: str) -> None:
    """Emit one ``timers_vs_records`` line per backend (``--timer-events`` records over a
    tenth as many keys)."""
    for backend in args.backends:
        res = run_timers_case(
            spark,
            args.timer_events,
            args.timer_events // 10,
            backend,
            os.path.join(work, "timers"),
            args.records_per_split,
        )
        emit(
            {
                "bench": "timers_vs_records",
                "backend": backend,
                "events": args.timer_events,
                "keys": args.timer_events // 10,
                **res,
            }
        )
