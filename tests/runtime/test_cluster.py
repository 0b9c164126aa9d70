"""Multi-executor Spark whose executors share no local state: keyed state stays with its
executor epoch after epoch, and a killed executor's subtasks alone restore.

Two clusters, one per module parameter, each with three one-core executors:
``local-cluster[3,1,1024]`` (every executor keeps state in its own Spark local directory)
and a standalone master with three workers started from the pip package, each worker (as
root) in its own mount namespace with a private tmpfs over its local directory and on its
own loopback address, so its executor is, for all Spark and sparkpoint can tell, another
host. A driver process per cluster runs the jobs (``cluster_driver.py``): a keyed count at
parallelism 3 feeding a second keyed count at parallelism 6, 16 epochs, exactly-once file
sinks; checkpoints on the local filesystem or on the session's moto S3 server.

Each cluster runs two jobs, one per behaviour, and between them both state backends and
both checkpoint storages (``JOBS``): a job's placement does not depend on its backend or
storage, so every pair of them need not run on every cluster and behaviour.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from sparkpoint.testing import expected_keyed_count_output
from tests.fixtures.spark_cluster import ClusterDriver, StandaloneCluster, can_isolate_workers
from tests.runtime.jobs.reference import read_sink

pytestmark = pytest.mark.cluster

EVENTS, KEYS, KEYS2 = 9_600, 50, 70
RECORDS_PER_SPLIT = 300  # two splits: 16 epochs
EPOCHS = EVENTS // (2 * RECORDS_PER_SPLIT)
KILL_EPOCH = 8


@dataclass
class Cluster:
    kind: str
    driver: ClusterDriver
    standalone: StandaloneCluster | None


@pytest.fixture(scope="module", params=["local-cluster", "standalone"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """A three-executor cluster and its driver, stopped (process groups killed) at the end."""
    directory = str(tmp_path_factory.mktemp(request.param))
    standalone = None
    if request.param == "standalone":
        standalone = StandaloneCluster(directory)
        request.addfinalizer(standalone.stop)
        master = standalone.start().url
    else:
        master = "local-cluster[3,1,1024]"
    driver = ClusterDriver(master, 3, directory)
    request.addfinalizer(driver.stop)
    return Cluster(request.param, driver, standalone)


# The (state backend, checkpoint storage) of each cluster's two jobs: every cluster runs
# both backends and both storages, every behaviour runs on both clusters with both backends
# and both storages.
JOBS = {
    "local-cluster": {"stays": ("rocksdb", "s3"), "kill": ("hashmap", "local")},
    "standalone": {"stays": ("hashmap", "local"), "kill": ("rocksdb", "s3")},
}


def _run(
    cluster: Cluster,
    tmp_path: Any,
    s3_server: Any,
    backend: str,
    storage: str,
    kill: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if storage == "s3":
        checkpoint, fs_options = s3_server.unique_prefix(), s3_server.options
    else:
        checkpoint, fs_options = str(tmp_path / "ckpt"), None
    result = cluster.driver.run(
        events=EVENTS,
        keys=KEYS,
        keys2=KEYS2,
        p1=3,
        p2=6,
        backend=backend,
        checkpoint=checkpoint,
        fs_options=fs_options,
        out1=str(tmp_path / "out1"),
        out2=str(tmp_path / "out2"),
        records_per_split=RECORDS_PER_SPLIT,
        interval_ms=10,  # a checkpoint every epoch, however short epochs are
        kill=kill,
    )
    for out, keys in ((tmp_path / "out1", KEYS), (tmp_path / "out2", KEYS2)):
        recs, finals = expected_keyed_count_output(EVENTS, keys)
        got = read_sink(str(out))
        echoed = [o for o in got if o[0] == "rec"]
        assert len(echoed) == EVENTS and set(echoed) == recs, f"records of {out}"
        assert {o[1]: (o[2], o[3]) for o in got if o[0] == "final"} == finals, f"finals of {out}"
        assert len([o for o in got if o[0] == "final"]) == keys
    return result


def test_cluster_executors_are_separate(cluster: Cluster) -> None:
    """Three one-core executors; standalone ones on three hosts when run as root."""
    executors = cluster.driver.hello["executors"]
    assert sorted(executors) == ["0", "1", "2"]
    if cluster.standalone is not None and can_isolate_workers():
        assert cluster.standalone.isolated
        assert sorted(host for host, _cores in executors.values()) == [
            "127.0.0.2",
            "127.0.0.3",
            "127.0.0.4",
        ]


def test_keyed_state_stays_with_its_executor(
    cluster: Cluster, tmp_path: Any, s3_server: Any
) -> None:
    """16 epochs at parallelism 3 and 6: every keyed task of every epoch runs on the
    executor holding its state: no subtask restore, no failover, exact output (RocksDB and
    S3 on local-cluster, heap state and local checkpoints on standalone: ``JOBS``)."""
    r = _run(cluster, tmp_path, s3_server, *JOBS[cluster.kind]["stays"])
    assert r["epochs"] >= EPOCHS
    assert r["restarts"] == 0 and r["failovers"] == [] and r["subtask_restores"] == []
    assert r["checkpoints"] >= 5
    for epoch in r["epoch_reports"]:
        assert epoch["runs"] == 1, epoch
        assert epoch["keyed_tasks"] == epoch["on_preferred_executor"] == 9, epoch
    placement = r["placements"][-1]["placement"]
    assert sorted(placement["count"]) == ["0", "1", "2"]  # spread by cores
    assert sorted(Counter(placement["count2"]).values()) == [2, 2, 2]
    assert all(p["placement"] == placement for p in r["placements"][1:])  # never moved


def test_killed_executor_restores_only_its_subtasks(
    cluster: Cluster, tmp_path: Any, s3_server: Any
) -> None:
    """SIGKILL of the executor JVM holding subtask 0 of ``count`` in the middle of epoch 8:
    exactly its subtasks (one of ``count``, two of ``count2``) restore, on other executors,
    the rest of the job goes on, nothing fails over, and the output is exact (heap state
    and local checkpoints on local-cluster, RocksDB and S3 on standalone: ``JOBS``)."""
    kill = {"epoch": KILL_EPOCH, "delay_s": 0.15}
    r = _run(cluster, tmp_path, s3_server, *JOBS[cluster.kind]["kill"], kill=kill)
    (kill,) = r["kills"]
    assert kill.get("pid"), "the executor was not killed"
    dead = kill["executor"]
    lost = sorted(
        (op, i)
        for op, executors in kill["placement"].items()
        for i, executor in enumerate(executors)
        if executor == dead
    )
    assert len(lost) == 3  # one subtask of count, two of count2
    restores = r["subtask_restores"]
    assert sorted((x["operator_id"], x["subtask"]) for x in restores) == lost
    assert all(x["executor_id"] != dead for x in restores)
    assert {x["epoch"] for x in restores} <= {KILL_EPOCH, KILL_EPOCH + 1}
    assert r["restarts"] == 0 and r["failovers"] == []
    later = [e for e in r["epoch_reports"] if e["epoch"] > KILL_EPOCH + 1]
    assert later and all(e["on_preferred_executor"] == e["keyed_tasks"] for e in later)
