"""``SparkStreamSource``: Spark's file and rate sources feed a keyed sparkpoint job; exact
output after a failover, and after the driver is killed while Spark has staged a batch it
has not committed (Spark replays that batch on restart; it is applied once)."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from sparkpoint.connectors.spark_source import SparkStreamSource
from sparkpoint.testing import FailureInjector, expected_keyed_count_output
from tests.runtime.jobs import read_sink
from tests.runtime.spark_source_jobs import (
    N_FILES,
    N_KEYS,
    PER_FILE,
    file_stream,
    source_job,
    write_input,
)

N_EVENTS = N_FILES * PER_FILE


def make_env(spark: Any, tmp_path: Any) -> Any:
    """Parallelism 2, a checkpoint after every epoch."""
    from sparkpoint.common import Configuration, RestartStrategies
    from sparkpoint.datastream import (
        CheckpointingMode,
        FileSystemCheckpointStorage,
        StreamExecutionEnvironment,
    )

    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local-state"))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(6, 100))
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    return env


def assert_exact(out_dir: str, n_events: int) -> None:
    out = read_sink(out_dir)
    recs, finals = expected_keyed_count_output(n_events, N_KEYS)
    echoed = [o for o in out if o[0] == "rec"]
    assert len(echoed) == n_events and set(echoed) == recs
    assert {o[1]: (o[2], o[3]) for o in out if o[0] == "final"} == finals


def test_file_stream_exactly_once_after_failover(spark: Any, tmp_path: Any) -> None:
    write_input(str(tmp_path / "in"))
    source = SparkStreamSource(
        file_stream(spark, str(tmp_path / "in")), str(tmp_path / "staged"),
        str(tmp_path / "spark-ckpt"), trigger_interval="100 milliseconds",
        end_batch=N_FILES - 1, max_batches_per_epoch=2,
    )
    # Four failures: every attempt Spark makes of the task fails, so the job fails over.
    injector = FailureInjector(str(tmp_path / "fault"), N_EVENTS // 2, times=4)
    env = make_env(spark, tmp_path)
    source_job(env, source, str(tmp_path / "out"), N_KEYS, injector)
    try:
        result = env.execute("spark-file-stream")
    finally:
        source.stop()
    assert injector.fired() == 4 and result.restarts == 1
    assert_exact(str(tmp_path / "out"), N_EVENTS)


def test_rate_stream_every_value_once(spark: Any, tmp_path: Any) -> None:
    df = spark.readStream.format("rate").option("rowsPerSecond", 300).load()
    source = SparkStreamSource(df, str(tmp_path / "staged"), str(tmp_path / "spark-ckpt"),
                               trigger_interval="300 milliseconds", end_batch=5)
    env = make_env(spark, tmp_path)
    source_job(env, source, str(tmp_path / "out"), N_KEYS)
    try:
        env.execute("spark-rate-stream")
    finally:
        source.stop()
    staged = spark.read.parquet(*[source.batch_dir(b) for b in range(6)]).count()
    assert staged > 0
    # The rate source numbers its rows 0, 1, 2...: batches 0..5 hold the first `staged`.
    assert_exact(str(tmp_path / "out"), staged)


SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark_source_driver.py")


def _run_driver(args: list[str], log_path: Any) -> int:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, SCRIPT, *args], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=env,
        )
        try:
            return proc.wait(timeout=400)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the Spark JVM it started


@pytest.mark.spark
def test_driver_killed_mid_stream_replayed_batch_applied_once(tmp_path: Any) -> None:
    """The driver dies inside foreachBatch of batch 3 (staged, not in Spark's commit log);
    restarted from sparkpoint's latest checkpoint and the same Spark checkpoint, Spark runs
    batch 3 again and sparkpoint applies it once."""
    write_input(str(tmp_path / "in"))
    faults = tmp_path / "faults"
    base = [str(tmp_path / d) for d in ("in", "staged", "spark-ckpt", "ckpt", "out")]
    code = _run_driver([*base, "-", str(faults)], tmp_path / "run1.log")
    log1 = (tmp_path / "run1.log").read_text()
    assert code == -signal.SIGKILL, log1[-3000:]
    assert len(list(faults.glob("fired-*"))) == 1
    spark_commits = tmp_path / "spark-ckpt" / "commits"
    assert not (spark_commits / "3").exists() and (tmp_path / "staged" / "batch-3").is_dir()
    done = sorted(glob.glob(str(tmp_path / "ckpt" / "*" / "chk-*" / "_metadata")),
                  key=lambda p: int(p.split("chk-")[1].split("/")[0]))
    assert done, log1[-3000:]
    latest = os.path.dirname(done[-1])

    code = _run_driver([*base, latest, "-"], tmp_path / "run2.log")
    log2 = (tmp_path / "run2.log").read_text()
    assert code == 0 and "JOB FINISHED" in log2, log2[-3000:]
    assert (spark_commits / "3").exists(), "Spark did not replay batch 3"
    assert "REPLAYED 3" in log2
    assert_exact(str(tmp_path / "out"), N_EVENTS)
