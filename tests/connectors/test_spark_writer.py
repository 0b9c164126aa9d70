"""Exactly-once ``SparkWriterSink`` into Parquet and a real PostgreSQL server, after injected
failures at every commit step: a task of the staging stage, a task of Spark's write job,
before the write, after the write before the commit record, after the commit record."""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import pytest

from sparkpoint.connectors.spark_writer import SparkWriterSink
from sparkpoint.testing import FailureInjector
from tests.fixtures.postgres import PostgresServer
from tests.runtime.jobs.driver_process import checkpointed_env, latest_checkpoint, run_driver
from tests.runtime.jobs.spark_writer_jobs import (
    SCHEMA,
    CommitFaults,
    CommitStepFault,
    FailWriteTaskOnce,
    expected_rows,
    read_parquet_rows,
    writer_job,
)

N_EVENTS = 3000
N_KEYS = 7
CONF = {"sparkpoint.epoch.max-records-per-split": "400"}


def make_sink(target: str, tmp_path: Any, request: pytest.FixtureRequest) -> SparkWriterSink:
    """A Parquet sink under ``tmp_path/out`` or a JDBC sink into a new PostgreSQL table."""
    if target == "parquet":
        return SparkWriterSink.parquet(str(tmp_path / "out"), SCHEMA)
    server: PostgresServer = request.getfixturevalue("postgres")
    table = f"out_{uuid.uuid4().hex[:8]}"
    return SparkWriterSink.jdbc(
        server.url, table, SCHEMA, str(tmp_path / "staging"), {"user": server.user}
    )


def written_rows(
    target: str, sink: SparkWriterSink, spark: Any, tmp_path: Any, request: pytest.FixtureRequest
) -> list[tuple[Any, ...]]:
    """What a reader of the target sees, sorted."""
    if target == "parquet":
        return read_parquet_rows(spark, str(tmp_path / "out"))
    server: PostgresServer = request.getfixturevalue("postgres")
    rows = []
    for line in server.psql(f"SELECT kind, k, a, b FROM {sink.target.table}").splitlines():
        kind, k, a, b = line.split("|")
        rows.append((kind, int(k), int(a), int(b) if b else None))
    return sorted(rows, key=repr)


def commit_count(
    target: str, sink: SparkWriterSink, tmp_path: Any, request: pytest.FixtureRequest
) -> int:
    """Commits the target recorded."""
    if target == "parquet":
        return len([n for n in os.listdir(tmp_path / "out") if n.startswith("sparkpoint_commit=")])
    server: PostgresServer = request.getfixturevalue("postgres")
    out = server.psql(
        f"SELECT count(*) FROM sparkpoint_commits WHERE target_table = '{sink.target.table}'"
    )
    return int(out.strip())


@pytest.mark.parametrize("target", ["parquet", "postgres"])
def test_exactly_once_after_faults_at_every_commit_step(
    spark: Any, tmp_path: Any, target: str, request: pytest.FixtureRequest
) -> None:
    env = checkpointed_env(spark, str(tmp_path / "ckpt"), "-", CONF)

    sink = make_sink(target, tmp_path, request)
    faults = tmp_path / "faults"
    staging_task = FailureInjector(str(faults / "staging-task"), N_EVENTS // 2)
    write_task = FailWriteTaskOnce(str(faults / "write-task"))
    steps = [
        CommitStepFault(str(faults / step), step)
        for step in ("before-write", "after-write", "after-publish")
    ]
    sink.transform = write_task
    sink.on_commit_step = CommitFaults(steps)
    writer_job(env, sink, N_EVENTS, N_KEYS, map_injector=staging_task)
    result = env.execute("spark-writer")

    assert staging_task.fired() == 1 and write_task.fired() == 1
    assert [s.fired() for s in steps] == [1, 1, 1]
    # Each fault at a commit step cost one restart (the second and third struck the commit
    # redone while restoring); Spark retried the task faults.
    assert result.restarts == 3
    assert written_rows(target, sink, spark, tmp_path, request) == expected_rows(N_EVENTS, N_KEYS)
    assert commit_count(target, sink, tmp_path, request) >= 2
    staging = tmp_path / ("out/_sparkpoint_staging" if target == "parquet" else "staging")
    assert not [p for p in staging.rglob("*") if p.is_file()], "staged files left behind"


JOBS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime", "jobs")
SCRIPT = os.path.join(JOBS, "spark_writer_driver.py")


@pytest.mark.spark
@pytest.mark.parametrize("target", ["parquet", "postgres"])
def test_driver_killed_between_write_and_commit_record(
    spark: Any, tmp_path: Any, target: str, request: pytest.FixtureRequest
) -> None:
    """SIGKILL of the driver after Spark wrote a commit and before it was published; the
    job restarted from the retained checkpoint (by this process, a new driver) redoes that
    commit once."""
    from tests.runtime.jobs import spark_writer_driver as job

    if target == "parquet":
        url, out = "parquet", str(tmp_path / "out")
        sink = SparkWriterSink.parquet(out, SCHEMA)
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        url, out = server.url, f"out_{uuid.uuid4().hex[:8]}"
        sink = SparkWriterSink.jdbc(url, out, SCHEMA, str(tmp_path / "staging"))
    ckpt, staging, faults = str(tmp_path / "ckpt"), str(tmp_path / "staging"), tmp_path / "f"
    code = run_driver(
        SCRIPT, [url, out, staging, ckpt, "-", str(faults), "after-write"], tmp_path / "run1.log"
    )
    log1 = (tmp_path / "run1.log").read_text()
    assert code == -signal.SIGKILL, log1[-3000:]
    assert len(list(faults.glob("fired-*"))) == 1
    assert "JOB FINISHED" not in log1
    before = written_rows(target, sink, spark, tmp_path, request)
    assert len(before) < len(expected_rows(job.N_EVENTS, job.N_KEYS))

    # The new driver: this process on the shared session, the rest of the input in one
    # epoch (records per epoch are a driver setting; the redone commit is the checkpoint's).
    env = job.writer_env(
        spark, url, out, staging, ckpt, latest_checkpoint(ckpt), "-", "-", records_per_split=3000
    )
    assert env.execute("spark-writer-resumed").restarts == 0
    assert len(list(faults.glob("fired-*"))) == 1
    assert written_rows(target, sink, spark, tmp_path, request) == expected_rows(
        job.N_EVENTS, job.N_KEYS
    )
