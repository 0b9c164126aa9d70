"""A driver process for multi-executor tests (started by ``tests.fixtures.spark_cluster``).

Usage: ``cluster_driver.py <master> <executors>``. It creates one SparkSession on the master,
waits for the executors, prints ``READY {...}``, then runs one job per JSON line on stdin
and prints ``RESULT {...}`` for each: a keyed count (``CountAndEcho``) at parallelism
``p1`` whose records feed a second keyed count at ``p2`` (0: none), each into an
exactly-once file sink, optionally killing the executor of a subtask mid-epoch.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def chain_job(env: Any, job: dict[str, Any]) -> None:
    """numbers -> (x % keys, x) -> CountAndEcho (p1) -> sink1, and its records ->
    (x % keys2, x) -> CountAndEcho (p2) -> sink2."""
    from sparkpoint.common import Encoder
    from sparkpoint.connectors.number_seq import NumberSequenceSource
    from sparkpoint.datastream.connectors.file_system import FileSink
    from sparkpoint.testing import CountAndEcho

    keys, keys2 = int(job["keys"]), int(job.get("keys2", 0))
    counted = (
        env.from_source(NumberSequenceSource(0, int(job["events"]) - 1), None, "numbers")
        .uid("numbers")
        .map(lambda x: (x % keys, x))
        .uid("to-pair")
        .key_by(lambda p: p[0])
        .process(CountAndEcho())
        .uid("count")
        .set_parallelism(int(job["p1"]))
    )
    encoder = Encoder.simple_string_encoder()
    counted.sink_to(FileSink.for_row_format(job["out1"], encoder).build()).uid("sink1")
    if int(job.get("p2", 0)):
        (
            counted.filter(lambda r: r[0] == "rec")
            .uid("records")
            .map(lambda r: (r[2] % keys2, r[2]))
            .uid("to-pair-2")
            .key_by(lambda p: p[0])
            .process(CountAndEcho())
            .uid("count2")
            .set_parallelism(int(job["p2"]))
            .sink_to(FileSink.for_row_format(job["out2"], encoder).build())
            .uid("sink2")
        )


def run_job(spark: Any, job: dict[str, Any]) -> dict[str, Any]:
    from sparkpoint.common import Configuration, RestartStrategies
    from sparkpoint.datastream import (
        EmbeddedRocksDBStateBackend,
        FileSystemCheckpointStorage,
        HashMapStateBackend,
        StreamExecutionEnvironment,
    )
    from sparkpoint.fs import configure
    from sparkpoint.testing import EpochStart, Faults, kill_executor

    if job.get("fs_options"):
        configure(job["fs_options"])
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(job["records_per_split"]))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(int(job.get("interval_ms", 500)))
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(job["checkpoint"])
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 500))
    env.set_state_backend(
        EmbeddedRocksDBStateBackend(True) if job["backend"] == "rocksdb" else HashMapStateBackend()
    )
    app_id = spark.sparkContext.applicationId
    kills: list[dict[str, Any]] = []
    kill = job.get("kill")

    def maybe_kill(event: EpochStart) -> None:
        if not kill or kills or event.epoch != int(kill["epoch"]):
            return
        executor = event.placement["count"][0]  # the executor of subtask 0 of "count"
        kills.append(
            {
                "epoch": event.epoch,
                "executor": executor,
                "placement": {k: list(v) for k, v in event.placement.items()},
            }
        )

        def later() -> None:
            time.sleep(float(kill.get("delay_s", 0.2)))  # inside the epoch's Spark job
            kills[-1]["pid"] = kill_executor(app_id, executor)

        threading.Thread(target=later, daemon=True).start()

    def hold(operator_id: str, subtask: int, epoch: int) -> None:
        # The killed subtask's epoch lasts until the kill, whatever an epoch costs (a
        # Spark job, or ~20 ms in long-running tasks); where it runs again, 1 s more.
        if kill and operator_id == "count" and subtask == 0 and epoch == int(kill["epoch"]):
            time.sleep(1.0)

    faults = Faults().on_epoch_start(maybe_kill).on_local_commit(hold)
    env.set_fault_injection(faults)
    chain_job(env, job)
    t0 = time.perf_counter()
    result = env.execute(job.get("name", "cluster-test"))
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "app_id": app_id,
        "epochs": result.epochs,
        "restarts": result.restarts,
        "failovers": [f.__dict__ for f in result.failovers],
        "subtask_restores": [r.__dict__ for r in result.subtask_restores],
        "epoch_reports": [
            {
                "epoch": e.epoch,
                "runs": e.runs,
                "seconds": round(e.seconds, 3),
                "keyed_tasks": e.keyed_tasks,
                "on_preferred_executor": e.on_preferred_executor,
                "restores": len(e.subtask_restores),
                "checkpoint_id": e.checkpoint_id,
            }
            for e in result.epoch_reports
        ],
        "checkpoints": len([c for c in result.checkpoints if c.status == "COMPLETED"]),
        "kills": kills,
        "placements": [
            {
                "epoch": e.epoch,
                "run": e.run,
                "placement": {k: list(v) for k, v in e.placement.items()},
            }
            for e in faults.epochs_seen
        ],
    }


def main() -> None:
    master, executors = sys.argv[1], int(sys.argv[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), ROOT, os.environ.get("PYTHONPATH", "")]
    )
    from sparkpoint.runtime.spark.cluster import SparkCluster
    from sparkpoint.runtime.spark.session import get_spark_session

    spark = get_spark_session(master, {"spark.task.maxFailures": "4"})
    cluster = SparkCluster(spark)
    deadline = time.monotonic() + 180
    while len(cluster.executor_ids()) < executors:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {cluster.executor_ids()} of {executors} executors came up")
        time.sleep(0.25)
    live = cluster.live_executors()
    print(
        "READY "
        + json.dumps(
            {
                "app_id": spark.sparkContext.applicationId,
                "executors": {e: [s.host, s.cores] for e, s in live.items()},
            }
        ),
        flush=True,
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            out = run_job(spark, json.loads(line))
        except Exception:
            out = {"error": traceback.format_exc()}
        print("RESULT " + json.dumps(out, default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
