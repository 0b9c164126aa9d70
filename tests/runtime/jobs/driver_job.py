"""A job run as its own driver process by test_driver_failure.py (killed), and the same job
built on a given session (the test resumes it on its own, warm one)."""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)


def keyed_count_env(
    spark: Any,
    ckpt: str,
    out: str,
    restore: str,
    parallelism: int,
    events: int,
    keys: int,
    records_per_split: int = 500,
) -> Any:
    """The keyed count into ``out``, a retained checkpoint after every epoch in ``ckpt``,
    restored from ``restore`` unless it is ``-``."""
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import (
        CheckpointingMode,
        ExternalizedCheckpointRetention,
        FileSystemCheckpointStorage,
        StreamExecutionEnvironment,
    )
    from tests.runtime.jobs.reference import keyed_count_job

    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(records_per_split))
    conf.set_string("sparkpoint.local-state.dir", os.path.join(os.path.dirname(out), "ls"))
    if restore != "-":
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_storage(FileSystemCheckpointStorage(ckpt))
    cc.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    cc.set_num_retained_checkpoints(2)
    keyed_count_job(env, out, events, keys)
    return env


def main() -> None:
    ckpt, out, restore, parallelism, events, keys = sys.argv[1:7]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), sys.path[0], os.environ.get("PYTHONPATH", "")]
    )
    from sparkpoint.runtime.spark.session import get_spark_session

    spark = get_spark_session("local[2,4]")
    env = keyed_count_env(spark, ckpt, out, restore, int(parallelism), int(events), int(keys))
    env.execute("driver-failure")
    print("JOB FINISHED", flush=True)


if __name__ == "__main__":
    main()
