"""The ``metrics`` case: the keyed count (heap, no checkpoints) whose ``process_element``
also increments a user counter and updates a distribution per record, alternated with the
plain count and with one that registers the same metrics but updates none (what
registering and reporting cost) for ``--metric-rounds`` rounds: the median of each, the
overheads in percent, and what the two calls cost per record in a plain Python loop."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from keyed_count.harness import emit
from keyed_count.job import CountPerKey, run_sparkpoint
from sparkpoint.metrics.registry import TaskMetrics
from sparkpoint.runtime.operators.context import MAX_WATERMARK
from sparkpoint.runtime.task.router import GROUP_TARGET


class CountPerKeyWithMetrics(CountPerKey):
    """``CountPerKey`` plus a counter and a distribution updated for every record."""

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        group = runtime_context.get_metrics_group().add_group("bench")
        self.records = group.counter("records")
        self.values = group.distribution("values")

    def process_element(self, value: Any, ctx: Any) -> None:
        # CountPerKey's body repeated rather than called through super(): a super() call
        # per record costs more than the two metric calls, and is not what is measured.
        self.records.inc()
        self.values.update(value[1])
        c = self.count.value()
        if c is None:
            c = 0
            ctx.timer_service().register_event_time_timer(MAX_WATERMARK)
        self.count.update(c + value[1])


class CountPerKeyRegistered(CountPerKeyWithMetrics):
    """The same metrics registered in ``open`` but not updated per record: what registering
    and reporting them costs, without the per-record calls."""

    # The plain function's own body: no per-record call through super().
    process_element = CountPerKey.process_element


VARIANTS = {
    "plain": None,
    "registered": CountPerKeyRegistered,
    "metrics": CountPerKeyWithMetrics,
}


def run(spark: Any, args: Any, work: str) -> None:
    """Emit one ``metric_overhead`` line per ``--keys`` value (heap backend)."""
    for keys in args.keys:
        rates: dict[str, list[int]] = {name: [] for name in VARIANTS}
        exact = True
        counted: list[int] = []
        distributed: list[int] = []
        names = list(VARIANTS)
        for i in range(args.metric_rounds):
            # Each round in another order (rotated, then reversed), so no variant always
            # runs first or after the same one.
            order = names[i % 3 :] + names[: i % 3]
            for name in order if i % 2 == 0 else order[::-1]:
                function = VARIANTS[name]
                r = run_sparkpoint(
                    spark,
                    args.events,
                    keys,
                    "hashmap",
                    False,
                    os.path.join(work, "metrics"),
                    args.records_per_split,
                    count_function=None if function is None else function(),
                )
                rates[name].append(r["events_per_s"])
                exact = exact and r["exact"]
                if name == "metrics":
                    counted.append(_user_total(r["_client_metrics"], ".bench.records"))
                    distributed.append(_user_total(r["_client_metrics"], ".bench.values"))
        median = {name: statistics.median(v) for name, v in rates.items()}
        emit(
            {
                "bench": "metric_overhead",
                "backend": "hashmap",
                "events": args.events,
                "keys": keys,
                "rounds": args.metric_rounds,
                "exact": exact
                and all(c == args.events for c in counted)
                and all(d == args.events for d in distributed),
                "user_counter_totals": counted,
                "distribution_counts": distributed,
                **{f"{name}_events_per_s": round(m) for name, m in median.items()},
                **{f"{name}_runs": v for name, v in rates.items()},
                "overhead_pct": round(100 * (median["plain"] / median["metrics"] - 1), 2),
                "registered_overhead_pct": round(
                    100 * (median["plain"] / median["registered"] - 1), 2
                ),
                "calls_ns_per_record": plain_loop_ns(1_000_000),
            }
        )


def plain_loop_ns(n: int) -> float:
    """Nanoseconds per record that ``inc()`` and ``update(1)`` add to a plain Python loop on
    one core (the task's fold after every batch included): the floor of the overhead."""
    task = TaskMetrics()
    group = task.group("op").add_group("bench")
    records, values = group.counter("records"), group.distribution("values")
    batches = range(n // GROUP_TARGET)
    best = {"empty": float("inf"), "calls": float("inf")}
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in batches:
            for _ in range(GROUP_TARGET):
                pass
            task.fold()
        best["empty"] = min(best["empty"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in batches:
            for _ in range(GROUP_TARGET):
                records.inc()
                values.update(1)
            task.fold()
        best["calls"] = min(best["calls"], time.perf_counter() - t0)
    per_record = (best["calls"] - best["empty"]) / (len(batches) * GROUP_TARGET)
    return round(per_record * 1e9, 1)


def _user_total(metrics: dict[str, Any], suffix: str) -> int:
    """A user counter's total (a distribution's count) over the subtasks."""
    total = 0
    for key, value in metrics.items():
        if key.endswith(suffix):
            total += value["count"] if isinstance(value, dict) else value
    return total
