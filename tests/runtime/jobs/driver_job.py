"""A job run as its own driver process by test_driver_failure.py (killed, then resumed)."""

from __future__ import annotations

import os
import sys

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)


def main() -> None:
    ckpt, out, restore, parallelism, events, keys = sys.argv[1:7]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), sys.path[0], os.environ.get("PYTHONPATH", "")]
    )
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import (
        CheckpointingMode,
        ExternalizedCheckpointRetention,
        FileSystemCheckpointStorage,
        StreamExecutionEnvironment,
    )
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.runtime.jobs.reference import keyed_count_job

    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", "500")
    conf.set_string("sparkpoint.local-state.dir", os.path.join(os.path.dirname(out), "ls"))
    if restore != "-":
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(
        conf, spark=get_spark_session("local[2,4]")
    )
    env.set_parallelism(int(parallelism))
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_storage(FileSystemCheckpointStorage(ckpt))
    cc.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    cc.set_num_retained_checkpoints(2)
    keyed_count_job(env, out, int(events), int(keys))
    env.execute("driver-failure")
    print("JOB FINISHED", flush=True)


if __name__ == "__main__":
    main()
