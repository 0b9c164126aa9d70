"""The keyed-count benchmark's harness: Spark sessions, the warm-up, JSON-lines output, the
median of alternated runs and the plain-Spark baselines measured in the same session."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from keyed_count.job import run_sparkpoint


def emit(record: dict[str, Any]) -> None:
    """Print ``record`` as one JSON line (flushed: a long run shows its progress)."""
    print(json.dumps(record), flush=True)


def warm_up(spark: Any, args: Any, work: str) -> dict[str, Any]:
    """Run the keyed count (1,000 keys, heap, checkpoints) for ``args.warm_up_seconds`` and
    until its throughput settles (the median of the last three runs within
    ``args.warm_up_tolerance`` of the three before), at most ``args.warm_up_max_runs`` runs.
    Each run's JIT compilation time over the session's JVMs is recorded when ``jcmd`` is
    on the PATH."""
    import statistics

    pids = _jvm_pids(spark)
    runs: list[int] = []
    jit: list[float | None] = []
    settled = False
    t0 = time.perf_counter()
    compiled = _jit_seconds(pids)
    while len(runs) < args.warm_up_max_runs and not (
        settled and time.perf_counter() - t0 >= args.warm_up_seconds
    ):
        res = run_sparkpoint(
            spark,
            args.events,
            1_000,
            "hashmap",
            True,
            os.path.join(work, "warm"),
            args.records_per_split,
        )
        runs.append(res["events_per_s"])
        now = _jit_seconds(pids)
        jit.append(None if now is None or compiled is None else round(now - compiled, 2))
        compiled = now
        if len(runs) >= 6:
            last, before = statistics.median(runs[-3:]), statistics.median(runs[-6:-3])
            settled = abs(last - before) <= args.warm_up_tolerance * before
    return {
        "seconds": round(time.perf_counter() - t0, 1),
        "settled": settled,
        "runs_events_per_s": runs,
        "jit_compile_seconds_per_run": jit,
    }


def add_warm_up_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``warm_up`` reads (every bench that warms up the same way takes them)."""
    parser.add_argument(
        "--warm-up-seconds",
        type=float,
        default=150.0,
        help="warm-up per Spark session at least this long (see warm_up)",
    )
    parser.add_argument(
        "--warm-up-max-runs",
        type=int,
        default=80,
        help="warm-up runs per Spark session at most (see warm_up)",
    )
    parser.add_argument(
        "--warm-up-tolerance",
        type=float,
        default=0.03,
        help="warm-up ends when the last three runs' median is within this share of the "
        "three before",
    )


def _jvm_pids(spark: Any) -> list[int]:
    """The driver's JVM and the JVMs it started (a ``local-cluster``'s executors)."""
    import subprocess

    driver = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    try:
        children = subprocess.run(
            ["ps", "-o", "pid=,comm=", "--ppid", str(driver)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except OSError:  # no ps: the driver alone
        children = ""
    return [
        driver,
        *(int(line.split()[0]) for line in children.splitlines() if line.split()[1:] == ["java"]),
    ]


def _jit_seconds(pids: list[int]) -> float | None:
    """Seconds the JVMs have spent compiling (HotSpot's ``java.ci.totalTime`` counter), or
    None without ``jcmd``."""
    import subprocess

    total = 0.0
    for pid in pids:
        try:
            out = subprocess.run(
                ["jcmd", str(pid), "PerfCounter.print"], capture_output=True, text=True, check=False
            ).stdout
        except OSError:
            return None
        counters = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if "java.ci.totalTime" not in counters:
            return None
        total += int(counters["java.ci.totalTime"]) / int(counters["sun.os.hrt.frequency"])
    return total


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput (every run must be exact)."""
    ordered = sorted(runs, key=lambda r: r["events_per_s"])
    median = dict(ordered[len(ordered) // 2])
    median["exact"] = all(r["exact"] for r in runs)
    return median


def public(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without the fields that are not JSON (the job result)."""
    return {k: v for k, v in record.items() if not k.startswith("_")}


def run_spark_groupby(spark: Any, n: int, keys: int) -> dict[str, Any]:
    """The plain Spark batch job of the same shape:
    ``spark.range(n).groupBy(id % keys).count()``."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    rows = spark.range(0, n, 1, 2).groupBy((F.col("id") % keys).alias("k")).count().collect()
    seconds = time.perf_counter() - t0
    ok = len(rows) == keys and sum(r["count"] for r in rows) == n
    return {"seconds": round(seconds, 3), "events_per_s": round(n / seconds), "exact": ok}


def empty_job_ms(spark: Any, repeats: int = 10) -> float:
    """Median milliseconds of an empty two-task Spark job (``mapInArrow``): the floor of an
    epoch's latency."""
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


def session(master: str, work: str) -> Any:
    """A SparkSession on ``master`` (a ``local-cluster`` once all its executors registered).

    The benchmark's user functions (``keyed_count.*``) are pickled by value, as they were
    when they lived in the script's ``__main__``: Python workers need not import them."""
    from pyspark import cloudpickle

    import keyed_count
    from sparkpoint.runtime.spark.session import get_spark_session

    cloudpickle.register_pickle_by_value(keyed_count)

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
        from sparkpoint.runtime.spark.cluster import SparkCluster

        wanted = int(master.split("[", 1)[1].split(",", 1)[0])
        while len(SparkCluster(spark).executor_ids()) < wanted:
            time.sleep(0.2)
    return spark
