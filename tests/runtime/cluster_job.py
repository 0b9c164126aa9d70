"""Runs the keyed-count job on local-cluster[2,1,1024] and SIGKILLs one executor JVM in the
middle of an epoch (run as its own process by test_cluster.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def executor_pids(app_id: str) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [
        int(line.split(None, 1)[0])
        for line in out.splitlines()
        if "CoarseGrainedExecutorBackend" in line and app_id in line
    ]


def main() -> None:
    ckpt, out, local, events, keys = sys.argv[1:6]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), sys.path[0], os.environ.get("PYTHONPATH", "")]
    )
    from sparkpoint.common import Configuration, RestartStrategies
    from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
    from sparkpoint.runtime.session import get_spark_session
    from sparkpoint.testing import EpochStart, Faults
    from tests.runtime.jobs import keyed_count_job

    spark = get_spark_session("local-cluster[2,1,1024]")
    app_id = spark.sparkContext.applicationId
    assert len(executor_pids(app_id)) == 2, "expected two executor JVMs"
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", "1000")
    conf.set_string("sparkpoint.local-state.dir", local)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage(FileSystemCheckpointStorage(ckpt))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 1000))
    killed: list[int] = []

    def kill_one_executor(event: EpochStart) -> None:
        if event.epoch != 4 or killed:
            return

        def later() -> None:
            time.sleep(0.3)  # inside the epoch's Spark job
            pid = executor_pids(app_id)[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        threading.Thread(target=later, daemon=True).start()

    env.set_fault_injection(Faults().on_epoch_start(kill_one_executor))
    keyed_count_job(env, out, int(events), int(keys))
    result = env.execute("cluster")
    print(f"KILLED {killed} RESTARTS {result.restarts} EPOCHS {result.epochs}", flush=True)


if __name__ == "__main__":
    main()
