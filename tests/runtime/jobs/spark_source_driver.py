"""A job run as its own driver process by test_spark_source.py: Spark's file source feeds
sparkpoint; with a fault dir the driver SIGKILLs itself while Spark stages batch 3. The test
resumes the same job (``stream_job``) on its own session.

Arguments: input dir, staging dir, Spark checkpoint, sparkpoint checkpoint dir, output dir,
restore pointer (``-``: none), fault dir (``-``: none).
"""

from __future__ import annotations

import glob
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)


def stream_job(
    spark: Any,
    dirs: list[str],
    restore: str,
    fault_dir: str,
    report: Callable[[str], None],
) -> tuple[Any, Any]:
    """The job on ``spark`` and its SparkStreamSource (stop it after the job); ``dirs`` are
    the input, staging, Spark checkpoint, sparkpoint checkpoint and output directories.
    ``report`` gets ``REPLAYED 3`` when batch 3 was staged before and is staged again."""
    from sparkpoint.connectors.spark_source import SparkStreamSource
    from sparkpoint.testing import FailureInjector
    from tests.runtime.jobs.driver_process import checkpointed_env
    from tests.runtime.jobs.spark_source_jobs import N_FILES, N_KEYS, file_stream, source_job

    in_dir, staging, spark_ckpt, ckpt, out = dirs
    env = checkpointed_env(spark, ckpt, restore, {})
    source = SparkStreamSource(
        file_stream(spark, in_dir),
        staging,
        spark_ckpt,
        trigger_interval="300 milliseconds",
        end_batch=N_FILES - 1,
        max_batches_per_epoch=1,
    )
    injector = FailureInjector(fault_dir, 3, 1, "kill") if fault_dir != "-" else None
    staged_before = os.path.isdir(source.batch_dir(3))

    def on_staged(batch_id: int) -> None:
        if batch_id == 3 and staged_before:
            report("REPLAYED 3")
        if injector is not None and batch_id == 3:
            # Die once sparkpoint has completed a checkpoint or two (of batches 0..2).
            deadline = time.time() + 120
            while len(glob.glob(os.path.join(ckpt, "*", "chk-*", "_metadata"))) < 2:
                if time.time() > deadline:
                    break
                time.sleep(0.1)
            injector.maybe_fail(batch_id)

    source.on_batch_staged = on_staged
    source_job(env, source, out, N_KEYS)
    return env, source


def main() -> None:
    *dirs, restore, fault_dir = sys.argv[1:8]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), sys.path[0], os.environ.get("PYTHONPATH", "")]
    )
    from sparkpoint.runtime.spark.session import get_spark_session

    spark = get_spark_session("local[2,4]")
    env, source = stream_job(spark, dirs, restore, fault_dir, lambda m: print(m, flush=True))
    try:
        env.execute("spark-stream-driver")
    finally:
        source.stop()
    print("JOB FINISHED", flush=True)


if __name__ == "__main__":
    main()
