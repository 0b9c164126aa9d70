"""Is there idle capacity between epochs? One keyed-count job of N events against two jobs
of N/2 events run at the same time in the same Spark session, alternated, on each master.

If two concurrent jobs finish their N events sooner than one job does, executors sit idle
between an epoch's stages (scheduling, task launch) and overlapping epochs would pay; if
not, the cores are busy. Each run also records the CPU seconds used by each kind of process
(driver JVM, executor JVMs, Python workers) from ``/proc`` (Linux): where the cluster's
extra cost goes. One JSON line per run, then one summary per master (medians).

    python bench/bench_concurrent_jobs.py [--masters local[2] local-cluster[2,1,1024]]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from typing import Any

from keyed_count import harness, job


def cpu_seconds_by_kind() -> dict[str, float]:
    """CPU seconds so far of this machine's Spark processes, by kind (Linux ``/proc``)."""
    out: dict[str, float] = {}
    if not os.path.isdir("/proc"):  # not Linux: no breakdown
        return out
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if "CoarseGrainedExecutorBackend" in cmd:
            kind = "executor_jvms"
        elif "java" in cmd and "SparkSubmit" in cmd:
            kind = "driver_jvm"
        elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
            kind = "python_workers"
        else:
            continue
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return out


def timed(spark: Any, work: str, jobs: int, events: int, keys: int, split: int) -> dict[str, Any]:
    """``jobs`` keyed counts of ``events / jobs`` events each, at the same time."""
    results: list[dict[str, Any]] = []

    def one(i: int) -> None:
        results.append(
            job.run_sparkpoint(
                spark, events // jobs, keys, "hashmap", True, os.path.join(work, f"job{i}"), split
            )
        )

    before = cpu_seconds_by_kind()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    after = cpu_seconds_by_kind()
    if len(results) != jobs or not all(r["exact"] for r in results):
        raise RuntimeError(f"{jobs} concurrent jobs: not every job finished exact")
    return {
        "jobs": jobs,
        "seconds": round(seconds, 3),
        "events_per_s": round(events / seconds),
        "cpu_seconds": {k: round(after[k] - before.get(k, 0.0), 2) for k in after},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--masters", nargs="+", default=["local[2]", "local-cluster[2,1,1024]"])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--records-per-split", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    harness.add_warm_up_arguments(parser)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="sparkpoint-concurrent-")
    for master in args.masters:
        # The job's functions travel by value (see harness.session): nothing to ship.
        spark = harness.session(master, work)
        harness.emit({"bench": "warm_up", "master": master, **harness.warm_up(spark, args, work)})
        runs: dict[int, list[int]] = {1: [], 2: []}
        for _ in range(args.repeats):
            for jobs in (1, 2):
                res = timed(spark, work, jobs, args.events, args.keys, args.records_per_split)
                runs[jobs].append(res["events_per_s"])
                harness.emit({"bench": "concurrent_jobs_run", "master": master, **res})
        harness.emit(
            {
                "bench": "concurrent_jobs",
                "master": master,
                "events": args.events,
                "keys": args.keys,
                "one_job_events_per_s": statistics.median(runs[1]),
                "two_jobs_events_per_s": statistics.median(runs[2]),
                "two_over_one": round(statistics.median(runs[2]) / statistics.median(runs[1]), 3),
            }
        )
        spark.stop()


if __name__ == "__main__":
    main()
