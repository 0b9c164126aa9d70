"""The benchmark's pipeline on Spark Structured Streaming: Spark's Kafka source -> parse ->
``applyInPandasWithState`` (a count per key in Spark's state store, one output row per
input record) -> Spark's Kafka sink (at-least-once: Spark has no transactional Kafka sink).
A micro-batch every second (``--real-time``: real-time mode, 1 s batches) is a checkpoint.

Run as a script: ``python spark_job.py --bootstrap ... --source ... --sink ... --checkpoints
<dir> --jars <comma-separated connector jars> [--real-time]``. It runs until it is killed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

OUTPUT = "key STRING, cnt LONG, ms STRING"
STATE = "cnt LONG"


def count(key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """Running count of ``key``: one row per input record, the state updated once."""
    import pandas as pd

    c = state.get[0] if state.exists else 0
    for pdf in frames:
        n = len(pdf)
        cnt = range(c + 1, c + n + 1)
        yield pd.DataFrame({"key": key[0], "cnt": cnt, "ms": pdf["ms"].to_numpy()})
        c += n
    state.update((c,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--jars", required=True)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--real-time", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.state import GroupStateTimeout

    spark = (
        SparkSession.builder.master(f"local[{args.parallelism}]")
        .appName("kafka-latency-spark")
        .config("spark.jars", args.jars)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(args.parallelism))
        .config("spark.python.worker.reuse", "true")
        # Real-time mode refuses batches under 5 s unless this minimum is lowered.
        .config("spark.sql.streaming.realTimeMode.minBatchDuration", "1000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    lines = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS line")
        .selectExpr("split(line, ',')[0] AS key", "split(line, ',')[1] AS ms")
    )
    counts = lines.groupBy("key").applyInPandasWithState(
        count, OUTPUT, STATE, "Update", GroupStateTimeout.NoTimeout
    )
    writer = (
        counts.selectExpr("concat_ws(',', key, CAST(cnt AS STRING), ms) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.sink)
        .option("checkpointLocation", args.checkpoints)
        .outputMode("update")
    )
    if args.real_time:
        writer = writer.trigger(realTime="1 second")
    else:
        writer = writer.trigger(processingTime="1 second")
    writer.start().awaitTermination()


if __name__ == "__main__":
    main()
