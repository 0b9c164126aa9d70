"""A slot sharing group's CPU cores as Spark's stage-level scheduling (issue 40 item 5): on
``local-cluster`` (Spark's standalone scheduler; dynamic allocation off, so task CPUs only)
the grouped stage's tasks run with 2 CPUs and the next stage's with 1; on ``local[...]``
(no stage-level scheduling in Spark) the job runs as before and one warning says the
resources are accepted without effect."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest

from sparkpoint.runtime.graph import Node, NodeKind, Stage
from sparkpoint.runtime.spark.resource_profiles import (
    StageResources,
    stage_resources,
    unsupported_reason,
)
from tests.runtime.jobs.resource_jobs import cpus_job

SCRIPT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "jobs", "resource_profile_driver.py"
)
N = 40


def test_stage_resources_sum_the_stages_groups() -> None:
    a = Node(id=1, kind=NodeKind.MAP, name="m")
    a.slot_sharing_group, a.slot_resources = (
        "a",
        {"cpu_cores": 0.5, "task_heap_memory_bytes": 3 << 20},
    )
    b = Node(id=2, kind=NodeKind.MAP, name="m")
    b.slot_sharing_group, b.slot_resources = "b", {"cpu_cores": 1.0, "managed_memory_bytes": 1}
    c = Node(id=3, kind=NodeKind.MAP, name="m")
    c.slot_sharing_group, c.slot_resources = (
        "a",
        {"cpu_cores": 0.5, "task_heap_memory_bytes": 3 << 20},
    )
    stage = Stage(id=0, roots=[a], parallelism=1, members=[a, b, c])
    assert stage_resources(stage) == StageResources(2, 4, 0)  # 1.5 cores up; 3 MiB + 1 byte up
    assert (
        stage_resources(
            Stage(id=1, roots=[], parallelism=1, members=[Node(id=4, kind=NodeKind.MAP, name="m")])
        )
        is None
    )
    assert (
        unsupported_reason("local[2,4]", {})
        == "Spark's local[2,4] master has no stage-level scheduling"
    )
    for master in ("spark://h:7077", "local-cluster[1,2,1024]", "yarn", "k8s://https://h"):
        assert unsupported_reason(master, {}) is None


@pytest.mark.cluster
def test_grouped_stage_runs_with_its_cpus_on_local_cluster(tmp_path: Any) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(tmp_path / "driver.log", "wb") as log:
        proc = subprocess.run(
            [sys.executable, SCRIPT, "local-cluster[1,2,1024]"],
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            timeout=300,
            check=False,
        )
    text = (tmp_path / "driver.log").read_text()
    assert proc.returncode == 0, text[-3000:]
    (line,) = [x for x in proc.stdout.decode().splitlines() if x.startswith("RESULT ")]
    rows = json.loads(line[len("RESULT ") :])["rows"]
    assert rows == [[x, 2, 1] for x in range(N)]
    # Without dynamic allocation the group's memory has no effect, and the log says so.
    assert "memory needs spark.dynamicAllocation.enabled" in text


def test_grouped_stage_on_local_runs_as_before_with_a_warning(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sparkpoint.runtime.spark.resource_profiles"):
        rows = cpus_job(spark, N)
    assert rows == [[x, 1, 1] for x in range(N)]
    warnings = [
        r.getMessage() for r in caplog.records if "accepted without effect" in r.getMessage()
    ]
    assert len(warnings) == 1 and "local[2,4] master has no stage-level scheduling" in warnings[0]
