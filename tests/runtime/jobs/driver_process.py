"""Helpers of the exactly-once tests: a checkpointed environment; for jobs run as their own
driver process and killed, starting the script and finding the checkpoint to resume from."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys
from typing import Any


def run_driver(script: str, args: list[str], log_path: Any) -> int:
    """Run ``script`` to its end (or its SIGKILL); then kill its group (its Spark JVM)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, script, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        try:
            return proc.wait(timeout=400)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def latest_checkpoint(ckpt: Any) -> str:
    """The newest completed checkpoint directory under ``ckpt`` (one job's)."""
    done = sorted(
        (os.path.dirname(p) for p in glob.glob(os.path.join(ckpt, "*", "chk-*", "_metadata"))),
        key=lambda d: int(d.rsplit("-", 1)[1]),
    )
    assert done, f"no completed checkpoint under {ckpt}"
    return done[-1]


def checkpointed_env(spark: Any, ckpt: str, restore: str, conf_values: dict[str, str]) -> Any:
    """Parallelism 2, a retained checkpoint after every epoch in ``ckpt``, restored from
    ``restore`` unless it is ``-``; at most six restarts (a test never loops forever)."""
    from sparkpoint.common import Configuration, RestartStrategies
    from sparkpoint.datastream import (
        CheckpointingMode,
        ExternalizedCheckpointRetention,
        FileSystemCheckpointStorage,
        StreamExecutionEnvironment,
    )

    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", os.path.join(os.path.dirname(ckpt), "ls"))
    for key, value in conf_values.items():
        conf.set_string(key, value)
    if restore != "-":
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(6, 100))
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_storage(FileSystemCheckpointStorage(ckpt))
    cc.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    cc.set_num_retained_checkpoints(2)
    return env
