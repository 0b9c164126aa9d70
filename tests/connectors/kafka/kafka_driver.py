"""The Kafka sum job run as its own driver process, for the faults a test process cannot take
in itself: an executor JVM killed (``local-cluster`` master) and the driver killed.

Usage: ``kafka_driver.py <json>`` with bootstrap, source, sink, prefix, checkpoint dir, master,
per_split, restore (a checkpoint path or null) and kill_epoch (null: none; else the executor
of subtask 0 of ``sum`` is SIGKILLed 0.5 s into that epoch, whose sink stage stalls on the
sums of records 2400-2407); optionally properties (the source's and sink's, e.g. security)
and kill_record (the Python worker parsing that record is SIGKILLed once; the injector's
directory is ``<dir>/inj``). Prints ``RESULT {...}`` when the job finishes.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def main() -> None:
    job: dict[str, Any] = json.loads(sys.argv[1])
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    from sparkpoint.runtime.spark.session import get_spark_session
    from sparkpoint.testing import EpochStart, FailureInjector, Faults, kill_executor
    from tests.connectors.kafka.kafka_jobs import StallAt, kafka_sum_job, running_sum_at

    spark = get_spark_session(job["master"])
    env = sum_job_env(spark, job)
    app_id = spark.sparkContext.applicationId
    kills: list[dict[str, Any]] = []
    stall = None
    if job.get("kill_epoch") is not None:
        kill_epoch = int(job["kill_epoch"])
        stall = StallAt({running_sum_at(x) for x in range(2400, 2408)}, 0.5)

        def maybe_kill(event: EpochStart) -> None:
            if kills or event.epoch != kill_epoch:
                return
            executor = event.placement["sum"][0]
            kills.append({"epoch": event.epoch, "executor": executor})

            def later() -> None:
                time.sleep(0.5)  # inside the epoch's Spark job
                kills[-1]["pid"] = kill_executor(app_id, executor)

            threading.Thread(target=later, daemon=True).start()

        env.set_fault_injection(Faults().on_epoch_start(maybe_kill))
    injector = None
    if job.get("kill_record") is not None:  # the Python worker parsing it is SIGKILLed once
        inj_dir = os.path.join(job["dir"], "inj")
        injector = FailureInjector(inj_dir, int(job["kill_record"]), mode="kill")
    kafka_sum_job(
        env,
        job["bootstrap"],
        job["source"],
        job["sink"],
        job["prefix"],
        injector=injector,
        sink_injector=stall,
        properties=job.get("properties"),
    )
    result = env.execute(job["prefix"])
    out = {
        "restarts": result.restarts,
        "epochs": result.epochs,
        "kills": kills,
        "subtask_restores": len(result.subtask_restores),
        "runs": sum(e.runs for e in result.epoch_reports),
    }
    print("RESULT " + json.dumps(out), flush=True)


def sum_job_env(spark: Any, job: dict[str, Any]) -> Any:
    """The sum job's environment on ``spark`` (restored from ``job["restore"]`` if set),
    retaining its two latest checkpoints when cancelled or killed; a test resumes a killed
    driver's job with it in its own process."""
    from sparkpoint.datastream import ExternalizedCheckpointRetention
    from tests.connectors.kafka.kafka_jobs import job_env

    env = job_env(spark, _Dir(job["dir"]), int(job["per_split"]), restore=job.get("restore"))
    cc = env.get_checkpoint_config()
    cc.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    cc.set_num_retained_checkpoints(2)
    return env


class _Dir(str):
    """A directory that joins with ``/`` as the tests' ``tmp_path`` does."""

    def __truediv__(self, name: str) -> str:
        return os.path.join(self, name)


if __name__ == "__main__":
    main()
