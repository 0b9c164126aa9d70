"""The ``metrics`` case: the keyed count (heap, no checkpoints) whose ``process_element``
also increments a user counter and updates a distribution per record, alternated three
times with the plain count: the median of each and the overhead in percent."""

from __future__ import annotations

import os
from typing import Any

from keyed_count.harness import emit
from keyed_count.job import CountPerKey, run_sparkpoint


class CountPerKeyWithMetrics(CountPerKey):
    """``CountPerKey`` plus a counter and a distribution updated for every record."""

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        group = runtime_context.get_metrics_group().add_group("bench")
        self.records = group.counter("records")
        self.values = group.distribution("values")

    def process_element(self, value: Any, ctx: Any) -> None:
        self.records.inc()
        self.values.update(value[1])
        super().process_element(value, ctx)


def run(spark: Any, args: Any, work: str) -> None:
    """Emit one ``metric_overhead`` line per ``--keys`` value (heap backend)."""
    for keys in args.keys:
        rates: dict[str, list[int]] = {"plain": [], "metrics": []}
        exact = True
        counted: list[int] = []
        for _ in range(3):
            for name in ("plain", "metrics"):
                r = run_sparkpoint(
                    spark,
                    args.events,
                    keys,
                    "hashmap",
                    False,
                    os.path.join(work, "metrics"),
                    args.records_per_split,
                    count_function=CountPerKeyWithMetrics() if name == "metrics" else None,
                )
                rates[name].append(r["events_per_s"])
                exact = exact and r["exact"]
                if name == "metrics":
                    counted.append(_user_count(r["_client_metrics"]))
        median = {name: sorted(v)[1] for name, v in rates.items()}
        emit(
            {
                "bench": "metric_overhead",
                "backend": "hashmap",
                "events": args.events,
                "keys": keys,
                "exact": exact and all(c == args.events for c in counted),
                "user_counter_totals": counted,
                **{f"{name}_events_per_s": m for name, m in median.items()},
                **{f"{name}_runs": v for name, v in rates.items()},
                "overhead_pct": round(100 * (median["plain"] / median["metrics"] - 1), 2),
            }
        )


def _user_count(metrics: dict[str, Any]) -> int:
    """The user counter's total over the subtasks."""
    return sum(v for k, v in metrics.items() if k.endswith(".bench.records"))
