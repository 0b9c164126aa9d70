"""State processor at scale: bootstrap a savepoint from an N-row DataFrame, read it back as a
DataFrame, and run a job that restores it and checks every key's state.

One process, one SparkSession (``local[2]`` by default), N = 10,000,000 by default. The
DataFrame is ``key = id, count = 2 id, name = "n<id>"`` (two typed ValueStates). Steps, each
with a baseline of the same shape measured in the same run:

- ``bootstrap``: ``SavepointWriter.new_savepoint(...).with_operator(...).write(...)``;
  baseline: writing the same DataFrame as Parquet.
- ``read``: ``SavepointReader.read_keyed_state`` aggregated (count, sum, a checksum of the
  names); baseline: the same aggregation over the Parquet files.
- ``job_<backend>``: numbers 0..N-1 -> ``key_by`` -> a KeyedProcessFunction that reads both
  states of its key and compares them with the expected values, restored from the savepoint
  (heap and RocksDB); it emits every mismatch and a sample of 1 key in 100,000. Baseline:
  the same job without the savepoint (no state to restore, the reads find nothing).

After each step it reports peak memory per process: the driver's Python process, the JVM
(driver and executor in local mode) and every Python worker (probed with a small job; peak
RSS is a lifetime maximum, so a step's figure includes the steps before it). Results are
JSON lines on stdout; every count and checksum is checked exact.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sparkpoint.datastream.functions import KeyedProcessFunction

UID = "bootstrapped"
SAMPLE = 100_000


class CheckState(KeyedProcessFunction):
    """Reads ``count`` and ``name`` of the key; emits ("bad", key, ...) when they differ from
    (2 key, "n<key>") (``check``), and ("sample", key) for one key in ``SAMPLE``."""

    def __init__(self, check: bool) -> None:
        self.check = check

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.common.typeinfo import Types
        from sparkpoint.datastream.state import ValueStateDescriptor

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.name = runtime_context.get_state(ValueStateDescriptor("name", Types.STRING()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        count, name = self.count.value(), self.name.value()
        if self.check and (count != 2 * value or name != f"n{value}"):
            yield ("bad", value, count, name)
        if value % SAMPLE == 0:
            yield ("sample", value)


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def _mb(kb: int) -> float:
    return round(kb / 1024, 1)


def memory(spark: Any) -> dict[str, Any]:
    """Peak RSS (MiB) of the driver's Python, the JVM and each Python worker."""
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    jvm_kb = 0
    with open(f"/proc/{jvm_pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                jvm_kb = int(line.split()[1])

    def probe(batches: Any) -> Any:  # runs in the Arrow workers the state processor uses
        import os as _os
        import resource as _resource

        import pyarrow as _pa

        for _ in batches:
            pass
        yield _pa.record_batch(
            [
                _pa.array([_os.getpid()]),
                _pa.array([_resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss]),
            ],
            names=["pid", "kb"],
        )

    rows = spark.range(0, 32, 1, 32).mapInArrow(probe, "pid long, kb long").collect()
    workers = {r["pid"]: r["kb"] for r in rows}
    return {
        "driver_python_peak_mb": _mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
        "jvm_peak_mb": _mb(jvm_kb),
        "python_worker_peak_mb": sorted(_mb(v) for v in workers.values()),
    }


def frame(spark: Any, n: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, n, 1, 8).select(
        F.col("id").alias("key"),
        (F.col("id") * 2).alias("count"),
        F.concat(F.lit("n"), F.col("id").cast("string")).alias("name"),
    )


def bootstrap(spark: Any, n: int, path: str, parallelism: int) -> dict[str, Any]:
    from sparkpoint.common.typeinfo import Types
    from sparkpoint.datastream.state import ValueStateDescriptor
    from sparkpoint.state_processor import OperatorTransformation, SavepointWriter

    t0 = time.perf_counter()
    writer = SavepointWriter.new_savepoint(spark, 128)
    writer.with_operator(
        UID,
        OperatorTransformation.bootstrap_with(frame(spark, n))
        .key_by("key")
        .transform(
            ValueStateDescriptor("count", Types.LONG()),
            ValueStateDescriptor("name", Types.STRING()),
            parallelism=parallelism,
        ),
    )
    writer.write(path)
    seconds = time.perf_counter() - t0
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return {
        "seconds": round(seconds, 2),
        "rows_per_s": round(n / seconds),
        "savepoint_bytes": size,
        "files": len(os.listdir(path)),
    }


def parquet_write(spark: Any, n: int, path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    frame(spark, n).write.parquet(path)
    seconds = time.perf_counter() - t0
    return {"seconds": round(seconds, 2), "rows_per_s": round(n / seconds)}


def _aggregate(df: Any, n: int) -> bool:
    from pyspark.sql import functions as F

    row = df.agg(
        F.count("*").alias("n"), F.sum("count").alias("s"), F.sum(F.length("name")).alias("chars")
    ).collect()[0]
    return bool(row["n"] == n and row["s"] == n * (n - 1) and row["chars"] == _name_chars(n))


def _name_chars(n: int) -> int:
    """Total length of the names "n0" .. "n<n-1>"."""
    total, low, digits = 0, 0, 1
    while low < n:
        high = min(n, 10**digits)
        total += (high - low) * (digits + 1)
        low, digits = high, digits + 1
    return total


def read(spark: Any, n: int, path: str) -> dict[str, Any]:
    from sparkpoint.common.typeinfo import Types
    from sparkpoint.state_processor import SavepointReader

    t0 = time.perf_counter()
    df = SavepointReader.read(spark, path).read_keyed_state(UID, key_type=Types.LONG())
    ok = _aggregate(df, n)
    seconds = time.perf_counter() - t0
    return {"seconds": round(seconds, 2), "rows_per_s": round(n / seconds), "exact": ok}


def parquet_read(spark: Any, n: int, path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    ok = _aggregate(spark.read.parquet(path), n)
    seconds = time.perf_counter() - t0
    return {"seconds": round(seconds, 2), "rows_per_s": round(n / seconds), "exact": ok}


def job(spark: Any, n: int, backend: str, restore: str | None, work: str) -> dict[str, Any]:
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import (
        EmbeddedRocksDBStateBackend,
        HashMapStateBackend,
        StreamExecutionEnvironment,
    )
    from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource

    shutil.rmtree(work, ignore_errors=True)
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(max(1, n // 4)))
    conf.set_string("sparkpoint.local-state.dir", os.path.join(work, "local"))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.set_state_backend(
        EmbeddedRocksDBStateBackend() if backend == "rocksdb" else HashMapStateBackend()
    )
    ds = (
        env.from_source(NumberSequenceSource(0, n - 1), None, "numbers")
        .key_by(lambda x: x)
        .process(CheckState(restore is not None))
        .uid(UID)
    )
    t0 = time.perf_counter()
    out = list(ds.execute_and_collect("bench-state-processor"))
    seconds = time.perf_counter() - t0
    bad = [o for o in out if o[0] == "bad"]
    samples = sorted(o[1] for o in out if o[0] == "sample")
    ok = not bad and samples == list(range(0, n, SAMPLE))
    return {
        "seconds": round(seconds, 2),
        "events_per_s": round(n / seconds),
        "exact": ok,
        "mismatches": len(bad),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--parallelism", type=int, default=4, help="subtasks of the savepoint")
    parser.add_argument("--backends", nargs="+", default=["heap", "rocksdb"])
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from sparkpoint.runtime.spark.session import get_spark_session

    spark = get_spark_session(args.master)
    work = tempfile.mkdtemp(prefix="sparkpoint-bench-sp-")
    n = args.rows
    try:
        # warm-up: Spark, the Python workers and the imports of every step
        warm = os.path.join(work, "warm")
        bootstrap(spark, 10_000, warm, 2)
        read(spark, 10_000, warm)
        job(spark, 10_000, "heap", warm, os.path.join(work, "warm-job"))
        emit({"bench": "warm_up_memory", **memory(spark)})

        base = parquet_write(spark, n, os.path.join(work, "parquet"))
        emit({"bench": "baseline_parquet_write", "rows": n, **base})
        boot = bootstrap(spark, n, os.path.join(work, "savepoint"), args.parallelism)
        emit(
            {
                "bench": "bootstrap",
                "rows": n,
                "parallelism": args.parallelism,
                **boot,
                "vs_parquet_write": round(boot["seconds"] / base["seconds"], 2),
                **memory(spark),
            }
        )

        base_read = parquet_read(spark, n, os.path.join(work, "parquet"))
        emit({"bench": "baseline_parquet_read", "rows": n, **base_read})
        got = read(spark, n, os.path.join(work, "savepoint"))
        emit(
            {
                "bench": "read",
                "rows": n,
                **got,
                "vs_parquet_read": round(got["seconds"] / base_read["seconds"], 2),
                **memory(spark),
            }
        )

        for backend in args.backends:
            plain = job(spark, n, backend, None, os.path.join(work, f"job-{backend}-plain"))
            emit({"bench": f"baseline_job_{backend}_without_state", "events": n, **plain})
            restored = job(
                spark,
                n,
                backend,
                os.path.join(work, "savepoint"),
                os.path.join(work, f"job-{backend}"),
            )
            emit(
                {
                    "bench": f"job_{backend}_restored",
                    "events": n,
                    **restored,
                    "vs_without_state": round(restored["seconds"] / plain["seconds"], 2),
                    **memory(spark),
                }
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
