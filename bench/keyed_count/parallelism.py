"""The ``parallelism`` case: the keyed count at each ``--parallelism`` against the two-stage
Spark floor of the same shape (``mapInArrow -> repartition(P) -> mapInArrow``)."""

from __future__ import annotations

import os
import time
from typing import Any

from keyed_count.harness import emit
from keyed_count.job import run_sparkpoint


def run_spark_two_stage_floor(spark: Any, rows: int, parallelism: int, jobs: int) -> float:
    """Seconds per job of ``mapInArrow -> repartition(P) -> mapInArrow`` (no state)."""
    import pyarrow as pa

    def ident(batches: Any) -> Any:
        for b in batches:
            yield pa.RecordBatch.from_pydict({"id": b.column(0)})

    times = []
    for _ in range(jobs):
        t0 = time.perf_counter()
        (
            spark.range(0, rows, 1, 2)
            .mapInArrow(ident, "id long")
            .repartition(parallelism)
            .mapInArrow(ident, "id long")
            .count()
        )
        times.append(time.perf_counter() - t0)
    return sum(times) / len(times)


def run_parallelism_case(
    spark: Any, n: int, keys: int, work: str, parallelism: int, epochs: int
) -> dict[str, Any]:
    """The keyed count (heap) at ``parallelism`` in about ``epochs`` epochs vs the floor."""
    per_split = max(1, -(-n // (parallelism * epochs)))
    floor = run_spark_two_stage_floor(spark, n // epochs, parallelism, epochs)
    res = run_sparkpoint(
        spark,
        n,
        keys,
        "hashmap",
        True,
        os.path.join(work, "par"),
        per_split,
        parallelism=parallelism,
    )
    res.pop("_result")
    return {
        **res,
        "spark_floor_job_ms": round(1000 * floor, 1),
        "epoch_over_floor": round(res["epoch_ms_avg"] / (1000 * floor), 2),
    }


def run(spark: Any, args: Any, work: str) -> None:
    """Emit one ``parallelism`` line per ``--parallelism`` value (1,000 keys, heap)."""
    for parallelism in args.parallelism:
        res = run_parallelism_case(
            spark,
            args.parallelism_events,
            1_000,
            os.path.join(work, "par"),
            parallelism,
            args.parallelism_epochs,
        )
        emit(
            {
                "bench": "parallelism",
                "parallelism": parallelism,
                "events": args.parallelism_events,
                "keys": 1_000,
                **res,
            }
        )
