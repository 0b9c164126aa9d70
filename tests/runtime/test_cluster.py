"""Multi-executor Spark (local-cluster[2,1,1024]): an executor JVM is killed mid-epoch."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from sparkpoint.testing import expected_keyed_count_output
from tests.runtime.jobs import read_sink

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster_job.py")


def _spark_home(tmp_path: Any) -> str:
    """A SPARK_HOME of symlinks, so executor work dirs land in tmp, not site-packages."""
    import pyspark

    real = os.path.dirname(pyspark.__file__)
    home = tmp_path / "spark-home"
    home.mkdir()
    for name in ("bin", "sbin", "jars", "python", "conf"):
        if os.path.exists(os.path.join(real, name)):
            os.symlink(os.path.join(real, name), home / name)
    return str(home)


@pytest.mark.cluster
def test_executor_jvm_killed_mid_epoch(tmp_path: Any) -> None:
    events, keys = 30_000, 7
    out = str(tmp_path / "out")
    env = dict(
        os.environ,
        SPARK_HOME=_spark_home(tmp_path),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    proc = subprocess.run(
        [
            sys.executable,
            SCRIPT,
            str(tmp_path / "ckpt"),
            out,
            str(tmp_path / "local"),
            str(events),
            str(keys),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    summary = [line for line in proc.stdout.splitlines() if line.startswith("KILLED")]
    assert summary and "KILLED []" not in summary[0], proc.stdout[-2000:]
    recs, finals = expected_keyed_count_output(events, keys)
    got = read_sink(out)
    echoed = [o for o in got if o[0] == "rec"]
    assert len(echoed) == events and set(echoed) == recs
    assert {o[1]: (o[2], o[3]) for o in got if o[0] == "final"} == finals
