"""Kafka → key_by/reduce → Kafka, EXACTLY_ONCE, under faults of whole processes, each job in
its own driver process (``kafka_driver.py``): an executor JVM SIGKILLed mid-epoch on a
``local-cluster`` master, and the driver SIGKILLed (with its Spark) then its job resumed from
the latest retained checkpoint by a new driver (in the test process, on the shared session).
A ``read_committed`` consumer reads every expected record exactly once and no transaction of
the job is left open."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.connectors.kafka.kafka_driver import sum_job_env
from tests.connectors.kafka.kafka_jobs import (
    PARTITIONS,
    check_exact,
    checkpoint_positions,
    create_topics,
    kafka_sum_job,
    latest_checkpoint,
    open_transactions,
)
from tests.fixtures.kafka import KafkaBroker

pytestmark = pytest.mark.spark  # the killed jobs run in driver subprocesses

N = 4000  # 1000 records per partition
RESUMED_PER_SPLIT = 250  # the resumed job reads the rest in larger epochs
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_driver.py")


def _start(job: dict[str, Any], log: Any) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.Popen(
        [sys.executable, SCRIPT, json.dumps(job)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )


def _result(log_path: Any) -> dict[str, Any]:
    text = log_path.read_text()
    lines = [line for line in text.splitlines() if line.startswith("RESULT ")]
    assert lines, text[-3000:]
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def _job(broker: KafkaBroker, name: str, tmp_path: Any, **kw: Any) -> dict[str, Any]:
    source, sink = create_topics(broker, name, N)
    return {
        "bootstrap": broker.bootstrap_servers,
        "source": source,
        "sink": sink,
        "prefix": name,
        "dir": str(tmp_path),
        "master": "local[2,4]",
        "per_split": 250,
        "restore": None,
        "kill_epoch": None,
        **kw,
    }


def test_executor_jvm_killed_mid_epoch(tmp_path: Any, kafka_broker: KafkaBroker) -> None:
    """On ``local-cluster[2,1,1024]``, the executor of subtask 0 of ``sum`` is SIGKILLed
    0.5 s into the third epoch, while its sink tasks stall in open transactions: its
    subtasks restore elsewhere, or the job fails over, and the output is exact."""
    job = _job(kafka_broker, "fault-executor", tmp_path, master="local-cluster[2,1,1024]")
    job["kill_epoch"] = 3
    with open(tmp_path / "driver.log", "wb") as log:
        proc = _start(job, log)
        assert proc.wait(timeout=300) == 0, (tmp_path / "driver.log").read_text()[-3000:]
    r = _result(tmp_path / "driver.log")
    (kill,) = r["kills"]
    assert kill.get("pid"), "the executor was not killed"
    assert kill["epoch"] == 3
    # The fault reached the job: its subtasks restored alone, or an epoch ran again, or
    # the whole job failed over.
    assert r["subtask_restores"] + (r["runs"] - r["epochs"]) + r["restarts"] >= 1
    check_exact(kafka_broker, job["sink"], job["prefix"], N)


def test_driver_killed_and_restarted_from_latest_checkpoint(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    """The driver (and its Spark) is SIGKILLed once three checkpoints completed, with the
    transactions of its running epoch open; a new driver (in the test process, on the shared
    session: no second JVM start-up) restores the latest retained checkpoint, commits what
    it promised, aborts the rest, and reads on from its offsets."""
    job = _job(kafka_broker, "fault-driver", tmp_path, per_split=50)
    ckpt = str(tmp_path / "ckpt")
    with open(tmp_path / "run1.log", "wb") as log:
        proc = _start(job, log)
        deadline = time.monotonic() + 240
        while _completed(ckpt) < 3:
            assert proc.poll() is None, (tmp_path / "run1.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no three checkpoints in time"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL  # the fault fired: the driver died of it
    latest = latest_checkpoint(ckpt)
    positions = checkpoint_positions(ckpt, int(latest.rsplit("-", 1)[1]))
    # Whole epochs of 50 records per partition (every partition), not the end of the input.
    assert len(positions) == PARTITIONS
    assert all(p % 50 == 0 for p in positions) and sum(positions) < N
    resumed = {**job, "restore": latest, "per_split": RESUMED_PER_SPLIT}
    env = sum_job_env(spark, resumed)
    kafka_sum_job(env, job["bootstrap"], job["source"], job["sink"], job["prefix"])
    result = env.execute(job["prefix"])
    # The new driver read on from the checkpoint's offsets: 1000 - position per partition.
    assert result.epochs >= -(-(1000 - min(positions)) // RESUMED_PER_SPLIT)
    check_exact(kafka_broker, job["sink"], job["prefix"], N)
    assert open_transactions(kafka_broker, job["prefix"], {job["sink"]: 2}) == []


def _completed(ckpt: str) -> int:
    if not os.path.isdir(ckpt):
        return 0
    try:
        latest = latest_checkpoint(ckpt)
    except ValueError:
        return 0
    return int(latest.rsplit("-", 1)[1])
