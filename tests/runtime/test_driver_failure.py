"""The driver process is killed with SIGKILL; a new driver resumes from the retained
checkpoint and the output is exactly once.

The killed driver is a process of its own (its JVM dies with it); the new driver is this
test process on the suite's shared session, which spares a second JVM's start-up and runs
the rest of the input in larger epochs (the records of an epoch are a driver setting)."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from typing import Any

from tests.runtime.jobs.driver_job import keyed_count_env
from tests.runtime.jobs.reference import check_keyed_count_output, read_sink

N_EVENTS = 40_000
N_KEYS = 13
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs", "driver_job.py")


def _complete_checkpoints(ckpt: str) -> list[str]:
    return sorted(
        (os.path.dirname(p) for p in glob.glob(os.path.join(ckpt, "*", "chk-*", "_metadata"))),
        key=lambda d: int(d.rsplit("-", 1)[1]),
    )


def _start(args: list[str], log: Any) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.Popen(
        [sys.executable, SCRIPT, *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )


def _latest_id(ckpt: str) -> int:
    done = _complete_checkpoints(ckpt)
    return int(done[-1].rsplit("-", 1)[1]) if done else 0


def test_driver_killed_and_resumed_from_retained_checkpoint(spark: Any, tmp_path: Any) -> None:
    ckpt, out = str(tmp_path / "ckpt"), str(tmp_path / "out")
    with open(tmp_path / "run1.log", "wb") as log:
        proc = _start([ckpt, out, "-", "2", str(N_EVENTS), str(N_KEYS)], log)
        deadline = time.time() + 300
        while _latest_id(ckpt) < 3 and time.time() < deadline:
            assert proc.poll() is None, (tmp_path / "run1.log").read_text()[-3000:]
            time.sleep(0.2)
        assert _latest_id(ckpt) >= 3, "no checkpoints before the deadline"
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Spark JVM
        proc.wait()
    committed_before = read_sink(out)
    assert not any(o[0] == "final" for o in committed_before)
    latest = _complete_checkpoints(ckpt)[-1]
    env = keyed_count_env(spark, ckpt, out, latest, 3, N_EVENTS, N_KEYS, records_per_split=10_000)
    result = env.execute("driver-failure-resumed")
    assert result.restarts == 0
    check_keyed_count_output(out, N_EVENTS, N_KEYS)
