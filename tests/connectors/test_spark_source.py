"""``SparkStreamSource``: Spark's file and rate sources feed a keyed sparkpoint job; exact
output after a failover, and after the driver is killed while Spark has staged a batch it
has not committed (Spark replays that batch on restart; it is applied once)."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from sparkpoint.connectors.spark_source import SparkStreamSource
from sparkpoint.testing import FailureInjector, expected_keyed_count_output
from tests.runtime.jobs.driver_process import checkpointed_env, latest_checkpoint, run_driver
from tests.runtime.jobs.reference import read_sink
from tests.runtime.jobs.spark_source_driver import stream_job
from tests.runtime.jobs.spark_source_jobs import (
    N_FILES,
    N_KEYS,
    PER_FILE,
    file_stream,
    source_job,
    write_input,
)

N_EVENTS = N_FILES * PER_FILE
CONF: dict[str, str] = {}


def assert_exact(out_dir: str, n_events: int) -> None:
    out = read_sink(out_dir)
    recs, finals = expected_keyed_count_output(n_events, N_KEYS)
    echoed = [o for o in out if o[0] == "rec"]
    assert len(echoed) == n_events and set(echoed) == recs
    assert {o[1]: (o[2], o[3]) for o in out if o[0] == "final"} == finals


def test_file_stream_exactly_once_after_failover(spark: Any, tmp_path: Any) -> None:
    write_input(str(tmp_path / "in"))
    source = SparkStreamSource(
        file_stream(spark, str(tmp_path / "in")),
        str(tmp_path / "staged"),
        str(tmp_path / "spark-ckpt"),
        trigger_interval="100 milliseconds",
        end_batch=N_FILES - 1,
        max_batches_per_epoch=2,
    )
    # Four failures: every attempt Spark makes of the task fails, so the job fails over.
    injector = FailureInjector(str(tmp_path / "fault"), N_EVENTS // 2, times=4)
    env = checkpointed_env(spark, str(tmp_path / "ckpt"), "-", CONF)
    source_job(env, source, str(tmp_path / "out"), N_KEYS, injector)
    try:
        result = env.execute("spark-file-stream")
    finally:
        source.stop()
    assert injector.fired() == 4 and result.restarts == 1
    assert_exact(str(tmp_path / "out"), N_EVENTS)


def test_rate_stream_every_value_once(spark: Any, tmp_path: Any) -> None:
    df = spark.readStream.format("rate").option("rowsPerSecond", 300).load()
    source = SparkStreamSource(
        df,
        str(tmp_path / "staged"),
        str(tmp_path / "spark-ckpt"),
        trigger_interval="300 milliseconds",
        end_batch=5,
    )
    env = checkpointed_env(spark, str(tmp_path / "ckpt"), "-", CONF)
    source_job(env, source, str(tmp_path / "out"), N_KEYS)
    try:
        env.execute("spark-rate-stream")
    finally:
        source.stop()
    staged = spark.read.parquet(*[source.batch_dir(b) for b in range(6)]).count()
    assert staged > 0
    # The rate source numbers its rows 0, 1, 2...: batches 0..5 hold the first `staged`.
    assert_exact(str(tmp_path / "out"), staged)


JOBS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime", "jobs")
SCRIPT = os.path.join(JOBS, "spark_source_driver.py")


@pytest.mark.spark
def test_driver_killed_mid_stream_replayed_batch_applied_once(spark: Any, tmp_path: Any) -> None:
    """The driver dies inside foreachBatch of batch 3 (staged, not in Spark's commit log);
    restarted (by this process, a new driver) from sparkpoint's latest checkpoint and the
    same Spark checkpoint, Spark runs batch 3 again and sparkpoint applies it once."""
    write_input(str(tmp_path / "in"))
    faults = tmp_path / "faults"
    base = [str(tmp_path / d) for d in ("in", "staged", "spark-ckpt", "ckpt", "out")]
    code = run_driver(SCRIPT, [*base, "-", str(faults)], tmp_path / "run1.log")
    log1 = (tmp_path / "run1.log").read_text()
    assert code == -signal.SIGKILL, log1[-3000:]
    assert len(list(faults.glob("fired-*"))) == 1
    spark_commits = tmp_path / "spark-ckpt" / "commits"
    assert not (spark_commits / "3").exists() and (tmp_path / "staged" / "batch-3").is_dir()
    latest = latest_checkpoint(tmp_path / "ckpt")

    # The new driver: this process on the shared session.
    reports: list[str] = []
    env, source = stream_job(spark, base, latest, "-", reports.append)
    try:
        assert env.execute("spark-stream-resumed").restarts == 0
    finally:
        source.stop()
    assert (spark_commits / "3").exists(), "Spark did not replay batch 3"
    assert reports == ["REPLAYED 3"]
    assert_exact(str(tmp_path / "out"), N_EVENTS)
