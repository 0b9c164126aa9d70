"""A job run as its own driver process by test_spark_writer.py: it may SIGKILL itself at a
commit step of its SparkWriterSink; the test then runs the same job (``writer_env``) from
the retained checkpoint on its own session.

Arguments: target (``parquet`` or a JDBC URL), output (path or table), staging path,
checkpoint dir, restore pointer (``-`` for none), fault dir (``-`` for none), commit step.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)

N_EVENTS = 3000
N_KEYS = 7


def writer_env(
    spark: Any,
    target: str,
    out: str,
    staging: str,
    ckpt: str,
    restore: str,
    fault_dir: str,
    step: str,
    records_per_split: int = 150,
) -> Any:
    """The writer job into ``target`` on ``spark``, killing its driver at ``step`` of its
    third commit when ``fault_dir`` is not ``-``."""
    from sparkpoint.connectors.spark_writer import SparkWriterSink
    from tests.runtime.jobs.driver_process import checkpointed_env
    from tests.runtime.jobs.spark_writer_jobs import SCHEMA, CommitStepFault, writer_job

    conf = {"sparkpoint.epoch.max-records-per-split": str(records_per_split)}
    env = checkpointed_env(spark, ckpt, restore, conf)
    if target == "parquet":
        sink = SparkWriterSink.parquet(out, SCHEMA)
    else:
        sink = SparkWriterSink.jdbc(target, out, SCHEMA, staging, {"user": "sparkpoint"})
    if fault_dir != "-":
        # The third commit: the job is well under way when the driver dies.
        sink.on_commit_step = CommitStepFault(fault_dir, step, mode="kill", skip=2)
    writer_job(env, sink, N_EVENTS, N_KEYS)
    return env


def main() -> None:
    target, out, staging, ckpt, restore, fault_dir, step = sys.argv[1:8]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), sys.path[0], os.environ.get("PYTHONPATH", "")]
    )
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.fixtures.system import postgresql_jdbc_jar

    spark = get_spark_session("local[2,4]", {"spark.jars": str(postgresql_jdbc_jar())})
    env = writer_env(spark, target, out, staging, ckpt, restore, fault_dir, step)
    env.execute("spark-writer-driver")
    print("JOB FINISHED", flush=True)


if __name__ == "__main__":
    main()
