"""What an idle unbounded Kafka job costs: CPU seconds per minute of the driver's process
tree (driver, Spark's JVM with its executor, Python workers; not the broker), epochs and
Spark jobs per minute, with epoch pacing (the defaults: the ``auto`` epoch mode; ``job`` and
``long-running`` too) against the baseline of the same run: a Spark job per epoch, epochs
back to back (``sparkpoint.epoch.interval=0``) and an empty epoch every second
(``sparkpoint.epoch.idle-interval=1 s``), which is how the job master ran before pacing.

The job is Kafka (8 partitions) → keyed count → Kafka EXACTLY_ONCE with checkpoints every
second. Each mode reads ``--records`` records, waits until a checkpoint covers them, then
measures ``--seconds`` with no input. Prints one JSON line per mode and a comparison line.
Usage: ``python bench/bench_kafka_idle.py [--seconds 60] [--records 1000]``
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

from bench.kafka_unbounded import (
    ProcessTree,
    expected_counts,
    keyed_count_job,
    produce,
    read_committed,
)

MODES = {
    "baseline": {
        "sparkpoint.epoch.mode": "job",
        "sparkpoint.epoch.interval": "0",
        "sparkpoint.epoch.idle-interval": "1 s",
    },
    "paced": {},  # the default epoch mode, auto: long-running tasks here
    "job": {"sparkpoint.epoch.mode": "job"},  # paced too
    "long-running": {"sparkpoint.epoch.mode": "long-running"},
}
PARTITIONS = 8
KEYS = 1000


def _covered(client: Any) -> bool:
    reports = client.get_epoch_reports()
    last_data = max((r.epoch for r in reports if r.records_in), default=0)
    stats = client.get_checkpoint_statistics()
    done = [s.epoch for s in stats if s.status == "COMPLETED"]
    return bool(done) and max(done) >= last_data


def _measure(
    spark: Any, broker: Any, tree: ProcessTree, mode: str, records: int, seconds: float
) -> dict[str, Any]:
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment

    name = f"idle-{mode}"
    broker.create_topic(f"{name}-in", PARTITIONS)
    broker.create_topic(f"{name}-out", PARTITIONS)
    produce(broker.bootstrap_servers, f"{name}-in", range(records), PARTITIONS, KEYS)
    produced = records
    work = tempfile.mkdtemp(prefix=f"bench-{name}-")
    conf = Configuration()
    for key, value in MODES[mode].items():
        conf.set_string(key, value)
    conf.set_string("sparkpoint.local-state.dir", os.path.join(work, "local"))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(f"file://{work}/ckpt")
    )
    keyed_count_job(env, broker.bootstrap_servers, f"{name}-in", f"{name}-out", name)
    client = env.execute_async(name)
    try:
        deadline = time.monotonic() + 300
        while client.job_master.progress.records_in < produced or not _covered(client):
            if time.monotonic() > deadline or client.get_job_execution_result().done():
                raise RuntimeError(f"{mode}: the job did not read and checkpoint its input")
            time.sleep(0.1)
        time.sleep(2.0)  # let the last checkpoint's uploads and cleanup settle
        tracker = spark.sparkContext.statusTracker()
        group = f"sparkpoint-{client.get_job_id()}"
        epochs0, jobs0 = len(client.get_epoch_reports()), len(tracker.getJobIdsForGroup(group))
        before, t0 = tree.cpu_by_pid(), time.monotonic()
        time.sleep(seconds)
        after, elapsed = tree.cpu_by_pid(), time.monotonic() - t0
        epochs = len(client.get_epoch_reports()) - epochs0
        jobs = len(tracker.getJobIdsForGroup(group)) - jobs0
    finally:
        client.cancel()
        client.wait(timeout=120)
        shutil.rmtree(work, ignore_errors=True)
    exact = read_committed(broker.bootstrap_servers, f"{name}-out")
    per_min = 60.0 / elapsed
    return {
        "bench": "kafka_idle",
        "mode": mode,
        "config": MODES[mode],
        "idle_seconds": round(elapsed, 1),
        # per process alive at the end: one that exited in the window (its CPU would
        # otherwise leave the sum) counts nothing
        "cpu_s_per_min": round(sum(t - before.get(p, 0.0) for p, t in after.items()) * per_min, 2),
        "epochs_per_min": round(epochs * per_min, 1),
        "spark_jobs_per_min": round(jobs * per_min, 1),
        "records": produced,
        "output_exact": sorted(exact) == sorted(expected_counts(produced, KEYS).elements()),
    }


def main(argv: list[str] | None = None) -> int:
    """Run every mode on one broker and one Spark session; print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="idle time measured")
    parser.add_argument("--records", type=int, default=1000, help="input before the idle time")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.fixtures.kafka import KafkaBroker

    broker = KafkaBroker()
    broker.start()
    try:
        spark = get_spark_session("local[2,4]")
        pid = broker.process.pid if broker.process is not None else -1
        tree = ProcessTree(exclude=(pid,))
        rows = [_measure(spark, broker, tree, m, args.records, args.seconds) for m in MODES]
        for row in rows:
            print(json.dumps(row), flush=True)
        base, paced = rows[0], rows[1]
        ratio = paced["cpu_s_per_min"] / max(base["cpu_s_per_min"], 1e-9)
        print(
            json.dumps(
                {
                    "bench": "kafka_idle",
                    "comparison": "paced vs baseline",
                    "cpu_s_per_min": [paced["cpu_s_per_min"], base["cpu_s_per_min"]],
                    "spark_jobs_per_min": [paced["spark_jobs_per_min"], base["spark_jobs_per_min"]],
                    "cpu_ratio": round(ratio, 3),
                }
            ),
            flush=True,
        )
        spark.stop()
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
