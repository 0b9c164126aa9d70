"""Keyed count on local[2] and on a multi-executor cluster: sparkpoint with and without
checkpointing vs a plain Spark job.

For each key count (1,000 and 1,000,000 by default) and state backend it runs, in one
process, first on local[2]:

- ``spark_groupby``: ``spark.range(N).groupBy(id % K).count().collect()`` (the plain Spark
  batch job of the same shape);
- ``sparkpoint_nockpt``: numbers -> (x % K, 1) -> key_by -> a counting KeyedProcessFunction
  (ValueState) that emits each key's count when the input ends;
- ``sparkpoint_ckpt``: the same with EXACTLY_ONCE checkpoints every second to the local
  filesystem;
- ``sparkpoint_window_ckpt``: the windowed variant, checkpointed the same way: event time
  ``ts = x`` (ms), then key_by -> tumbling event-time windows of a quarter of the input ->
  reduce (a count per key and window, emitted as each window closes).

It also times an empty Spark job (two tasks through ``mapInArrow``) as the floor for the
per-epoch latency. Then, on ``local-cluster[2,1,1024]`` (two one-core executors with
local state of their own: the same two cores), ``sparkpoint_ckpt`` again, with its
failovers, subtask restores and keyed tasks that ran away from their state, and the
cluster / local[2] throughput ratio. Every result is one JSON line on stdout; counts are
checked to be exact.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sparkpoint.datastream.functions import KeyedProcessFunction
from sparkpoint.runtime.context import MAX_WATERMARK


class CountPerKey(KeyedProcessFunction):
    """Counts records per key in ValueState; emits (key, count) when the input ends."""

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.common.typeinfo import Types
        from sparkpoint.datastream.state import ValueStateDescriptor

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> None:
        c = self.count.value()
        if c is None:
            c = 0
            ctx.timer_service().register_event_time_timer(MAX_WATERMARK)
        self.count.update(c + value[1])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ctx.get_current_key(), self.count.value()


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


class EventTimeIsX:
    """Timestamp assigner of the windowed variant: the record's number is its event time."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[2])


def _add_counts(a: Any, b: Any) -> Any:
    return (a[0], a[1] + b[1], a[2])


def run_sparkpoint(
    spark: Any, n: int, keys: int, backend: str, checkpoint: bool, work: str,
    records_per_split: int, windowed: bool = False,
) -> dict[str, Any]:
    from sparkpoint.common import Configuration
    from sparkpoint.connectors.sink import CollectSink
    from sparkpoint.datastream import (
        EmbeddedRocksDBStateBackend,
        FileSystemCheckpointStorage,
        HashMapStateBackend,
        StreamExecutionEnvironment,
    )
    from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource

    shutil.rmtree(work, ignore_errors=True)
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(records_per_split))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.set_state_backend(
        EmbeddedRocksDBStateBackend(True) if backend == "rocksdb" else HashMapStateBackend()
    )
    if checkpoint:
        env.enable_checkpointing(1000)
        env.get_checkpoint_config().set_checkpoint_storage(
            FileSystemCheckpointStorage(os.path.join(work, "ckpt"))
        )
    k = keys
    sink = CollectSink()
    numbers = env.from_source(NumberSequenceSource(0, n - 1), None, "numbers")
    if windowed:
        from sparkpoint.common import Time, WatermarkStrategy
        from sparkpoint.datastream.window import TumblingEventTimeWindows

        size = max(1, n // 4)
        (
            numbers.map(lambda x: (x % k, 1, x))
            .assign_timestamps_and_watermarks(
                WatermarkStrategy.for_monotonous_timestamps()
                .with_timestamp_assigner(EventTimeIsX())
            )
            .key_by(lambda t: t[0])
            .window(TumblingEventTimeWindows.of(Time.milliseconds(size)))
            .reduce(_add_counts)
            .sink_to(sink)
        )
    else:
        (
            numbers.map(lambda x: (x % k, 1))
            .key_by(lambda t: t[0])
            .process(CountPerKey())
            .sink_to(sink)
        )
    t0 = time.perf_counter()
    result = env.execute("bench")
    seconds = time.perf_counter() - t0
    out = sink.collected
    if windowed:  # one result per key and window of n // 4 consecutive numbers
        size = max(1, n // 4)
        windows = -(-n // size)
        ok = len(out) == windows * min(size, keys) and sum(c for _, c, _ in out) == n
    else:
        ok = len(out) == keys and sum(c for _, c in out) == n
    stats = [s for s in result.checkpoints if s.status == "COMPLETED"]
    epochs = [e.seconds for e in result.epoch_reports]
    return {
        "seconds": round(seconds, 3),
        "events_per_s": round(n / seconds),
        "exact": ok,
        "epochs": len(epochs),
        "epoch_ms_avg": round(1000 * sum(epochs) / max(1, len(epochs)), 1),
        "checkpoints": len(stats),
        "checkpoint_ms_avg": round(sum(s.duration_ms for s in stats) / max(1, len(stats)), 1),
        "checkpoint_state_bytes_last": stats[-1].state_size if stats else 0,
        "checkpoint_files_last": stats[-1].files_written if stats else 0,
        "failovers": len(result.failovers),
        "subtask_restores": len(result.subtask_restores),
        "keyed_tasks_elsewhere": sum(
            e.keyed_tasks - e.on_preferred_executor for e in result.epoch_reports
        ),
    }


def run_spark_groupby(spark: Any, n: int, keys: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    rows = spark.range(0, n, 1, 2).groupBy((F.col("id") % keys).alias("k")).count().collect()
    seconds = time.perf_counter() - t0
    ok = len(rows) == keys and sum(r["count"] for r in rows) == n
    return {"seconds": round(seconds, 3), "events_per_s": round(n / seconds), "exact": ok}


def empty_job_ms(spark: Any, repeats: int = 10) -> float:
    import pyarrow as pa

    def ident(batches: Any) -> Any:
        for b in batches:
            yield pa.RecordBatch.from_pydict({"id": b.column(0)})

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        spark.range(0, 2, 1, 2).mapInArrow(ident, "id long").collect()
        times.append(time.perf_counter() - t0)
    times.sort()
    return round(1000 * times[len(times) // 2], 1)


def _session(master: str, work: str) -> Any:
    from sparkpoint.runtime.session import get_spark_session

    if master.startswith("local-cluster"):
        # Executor work directories go to the bench's directory, not site-packages.
        import pyspark

        home = os.path.join(work, "spark-home")
        os.makedirs(home, exist_ok=True)
        real = os.path.dirname(pyspark.__file__)
        for name in ("bin", "sbin", "jars", "python", "conf"):
            if os.path.exists(os.path.join(real, name)):
                os.symlink(os.path.join(real, name), os.path.join(home, name))
        os.environ["SPARK_HOME"] = home
    spark = get_spark_session(master)
    if master.startswith("local-cluster"):
        from sparkpoint.runtime.spark_cluster import SparkCluster

        wanted = int(master.split("[", 1)[1].split(",", 1)[0])
        while len(SparkCluster(spark).executor_ids()) < wanted:
            time.sleep(0.2)
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000, 1_000_000])
    parser.add_argument("--backends", nargs="+", default=["hashmap", "rocksdb"])
    parser.add_argument("--records-per-split", type=int, default=100_000)
    parser.add_argument(
        "--cluster", default="local-cluster[2,1,1024]",
        help="multi-executor master compared with local[2] ('' to skip)",
    )
    parser.add_argument(
        "--no-windowed", dest="windowed", action="store_false",
        help="skip the windowed variant (tumbling event-time window + reduce) on local[2]",
    )
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="sparkpoint-bench-")
    masters = ["local[2]", *([args.cluster] if args.cluster else [])]
    checkpointed: dict[tuple[str, int, str], dict[str, Any]] = {}
    for master in masters:
        spark = _session(master, work)
        local = master == "local[2]"
        # Warm up Spark and the Python workers once.
        run_spark_groupby(spark, 100_000, 10)
        run_sparkpoint(spark, 20_000, 10, "hashmap", False, os.path.join(work, "warm"), 10_000)
        floor = empty_job_ms(spark)
        emit({"bench": "empty_spark_job", "master": master, "ms_median": floor})
        for keys in args.keys:
            base = run_spark_groupby(spark, args.events, keys) if local else None
            if base is not None:
                emit({"bench": "spark_groupby", "events": args.events, "keys": keys, **base})
            for backend in args.backends:
                common = {"master": master, "backend": backend, "events": args.events,
                          "keys": keys}
                no = None
                if local:
                    no = run_sparkpoint(spark, args.events, keys, backend, False,
                                        os.path.join(work, "no"), args.records_per_split)
                    emit({"bench": "sparkpoint_nockpt", **common, **no})
                ck = run_sparkpoint(spark, args.events, keys, backend, True,
                                    os.path.join(work, "ck"), args.records_per_split)
                emit({"bench": "sparkpoint_ckpt", **common, **ck})
                checkpointed[(master, keys, backend)] = ck
                if local and args.windowed:
                    win = run_sparkpoint(spark, args.events, keys, backend, True,
                                         os.path.join(work, "win"), args.records_per_split,
                                         windowed=True)
                    emit({"bench": "sparkpoint_window_ckpt", **common, **win,
                          "vs_keyed_count_ckpt": round(
                              win["events_per_s"] / ck["events_per_s"], 3)})
                if no is not None and base is not None:
                    emit({
                        "bench": "summary",
                        **common,
                        "checkpoint_overhead": round(
                            1 - ck["events_per_s"] / no["events_per_s"], 3),
                        "ckpt_vs_spark_groupby": round(
                            ck["events_per_s"] / base["events_per_s"], 3),
                        "epoch_ms_avg": ck["epoch_ms_avg"],
                        "empty_spark_job_ms": floor,
                        "epoch_latency_over_empty_job": round(ck["epoch_ms_avg"] / floor, 1),
                    })
        spark.stop()
    if args.cluster:
        for keys in args.keys:
            for backend in args.backends:
                ck_local = checkpointed[("local[2]", keys, backend)]
                ck_cluster = checkpointed[(args.cluster, keys, backend)]
                emit({
                    "bench": "cluster_vs_local",
                    "cluster": args.cluster,
                    "backend": backend,
                    "keys": keys,
                    "local_events_per_s": ck_local["events_per_s"],
                    "cluster_events_per_s": ck_cluster["events_per_s"],
                    "ratio": round(ck_cluster["events_per_s"] / ck_local["events_per_s"], 3),
                    "cluster_failovers": ck_cluster["failovers"],
                    "cluster_subtask_restores": ck_cluster["subtask_restores"],
                    "cluster_keyed_tasks_elsewhere": ck_cluster["keyed_tasks_elsewhere"],
                })
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
