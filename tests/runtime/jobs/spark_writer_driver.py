"""A job run as its own driver process by test_spark_writer.py: it may SIGKILL itself at a
commit step of its SparkWriterSink, and is then started again from the retained checkpoint.

Arguments: target (``parquet`` or a JDBC URL), output (path or table), staging path,
checkpoint dir, restore pointer (``-`` for none), fault dir (``-`` for none), commit step.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)

N_EVENTS = 3000
N_KEYS = 7


def main() -> None:
    target, out, staging, ckpt, restore, fault_dir, step = sys.argv[1:8]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), sys.path[0], os.environ.get("PYTHONPATH", "")]
    )
    from sparkpoint.connectors.spark_writer import SparkWriterSink
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.fixtures.system import postgresql_jdbc_jar
    from tests.runtime.jobs.driver_process import checkpointed_env
    from tests.runtime.jobs.spark_writer_jobs import SCHEMA, CommitStepFault, writer_job

    spark = get_spark_session("local[2,4]", {"spark.jars": str(postgresql_jdbc_jar())})
    env = checkpointed_env(spark, ckpt, restore, {"sparkpoint.epoch.max-records-per-split": "150"})
    if target == "parquet":
        sink = SparkWriterSink.parquet(out, SCHEMA)
    else:
        sink = SparkWriterSink.jdbc(target, out, SCHEMA, staging, {"user": "sparkpoint"})
    if fault_dir != "-":
        # The third commit: the job is well under way when the driver dies.
        sink.on_commit_step = CommitStepFault(fault_dir, step, mode="kill", skip=2)
    writer_job(env, sink, N_EVENTS, N_KEYS)
    env.execute("spark-writer-driver")
    print("JOB FINISHED", flush=True)


if __name__ == "__main__":
    main()
