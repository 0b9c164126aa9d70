"""Epochs per second of a small EXACTLY_ONCE Kafka job, by transaction naming strategy:
INCREMENTING (a fresh transactional id per transaction, its producer made ready ahead in
each Python worker: the baseline, same run) against POOLING (producers reused across epochs
in each Python worker).

Starts its own broker (``tests.fixtures.kafka``) and a ``local[2]`` Spark: a 4-partition
topic of ``--records`` records -> parse -> key_by/reduce -> KafkaSink EXACTLY_ONCE at
parallelism 2, ``--per-split`` records per partition and epoch, a checkpoint every epoch.
Each strategy runs ``--rounds`` times, alternating; every run's output is checked exact with
a ``read_committed`` consumer. Prints one JSON line per run and one summary line (medians).
Run: ``python bench/bench_kafka_sink_epochs.py [--records 8000 --per-split 100 --rounds 2]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fixtures.kafka import KafkaBroker


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def run(spark: Any, broker: KafkaBroker, name: str, strategy: str, args: Any) -> dict[str, Any]:
    """One job with ``strategy``; its wall time, epochs and epochs per second."""
    from sparkpoint.datastream.connectors.kafka import TransactionNamingStrategy
    from tests.connectors.kafka.kafka_jobs import (
        create_topics,
        expected_output,
        job_env,
        kafka_sum_job,
        read_committed,
    )

    source, sink = create_topics(broker, name, args.records)
    with tempfile.TemporaryDirectory(prefix="sparkpoint-bench-kafka-") as work:
        from pathlib import Path

        env = job_env(spark, Path(work), per_split=args.per_split)
        kafka_sum_job(
            env,
            broker.bootstrap_servers,
            source,
            sink,
            name,
            naming=TransactionNamingStrategy[strategy],
        )
        t0 = time.perf_counter()
        result = env.execute(name)
        seconds = time.perf_counter() - t0
    got = collections.Counter(read_committed(broker.bootstrap_servers, sink))
    if got != expected_output(args.records):
        raise AssertionError(f"{name}: output not exact ({sum(got.values())} lines)")
    return {
        "strategy": strategy,
        "seconds": round(seconds, 2),
        "epochs": result.epochs,
        "epochs_per_s": round(result.epochs / seconds, 2),
        "ms_per_epoch": round(1000 * seconds / result.epochs, 1),
    }


def main() -> None:
    """Start a broker and Spark, run both strategies ``--rounds`` times, stop both."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=8000)
    parser.add_argument("--per-split", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from sparkpoint.runtime.spark.session import get_spark_session

    broker = KafkaBroker()
    spark = None
    try:
        broker.start()
        spark = get_spark_session("local[2,4]")
        runs: dict[str, list[dict[str, Any]]] = {"INCREMENTING": [], "POOLING": []}
        for i in range(args.rounds):
            for strategy in runs:
                r = run(spark, broker, f"bench-{strategy.lower()}-{i}", strategy, args)
                runs[strategy].append(r)
                _emit(what="kafka_eo_epochs", round=i, **r)
        base = statistics.median(r["ms_per_epoch"] for r in runs["INCREMENTING"])
        pooled = statistics.median(r["ms_per_epoch"] for r in runs["POOLING"])
        _emit(
            what="kafka_eo_epochs_summary",
            baseline="INCREMENTING",
            baseline_ms_per_epoch=base,
            pooling_ms_per_epoch=pooled,
            saved_ms_per_epoch=round(base - pooled, 1),
            speedup=round(base / pooled, 2),
        )
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()


if __name__ == "__main__":
    main()
