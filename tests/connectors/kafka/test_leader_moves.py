"""Kafka → keyed state → Kafka EXACTLY_ONCE on three brokers (replication factor 3) while
partition leadership moves (issue 38, "Several brokers"): the broker leading the most of the
job's partitions is stopped mid-run (its leaderships move to the others), started again,
and Kafka's preferred-leader election moves them back. The output is exact under
``read_committed`` and, by Kafka's own tools, no transaction of the job is left open."""

from __future__ import annotations

import collections
import time
from typing import Any

from sparkpoint.common import RestartStrategies
from tests.connectors.kafka.kafka_jobs import (
    StallAt,
    expected_output,
    job_env,
    kafka_sum_job,
    produce_input,
    read_committed,
    running_sum_at,
)
from tests.fixtures.kafka_cluster import KafkaCluster, kafka_cluster
from tests.fixtures.kafka_tools import open_transactions

__all__ = ["kafka_cluster"]

N = 4000


def _until(condition: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(0.5)


def test_exactly_once_while_leaders_move(
    spark: Any, tmp_path: Any, kafka_cluster: KafkaCluster
) -> None:
    cluster, name = kafka_cluster, "leaders"
    source, sink = f"{name}-in", f"{name}-out"
    cluster.create_topic(source, 4)
    cluster.create_topic(sink, 2)
    bootstrap = cluster.bootstrap_servers
    produce_input(bootstrap, source, N)
    env = job_env(
        spark, tmp_path, per_split=50, restarts=RestartStrategies.fixed_delay_restart(20, 1000)
    )
    # Slow epochs (0.2 s at every 40th record's sum) so that the moves land mid-run.
    stall = StallAt({running_sum_at(x) for x in range(0, N, 40)}, 0.2)
    kafka_sum_job(env, bootstrap, source, sink, name, sink_injector=stall)
    topics = (source, sink)
    client = env.execute_async(name)
    progress = client.job_master.progress
    _until(lambda: progress.epochs_run >= 3, "three epochs")

    before = {t: cluster.leaders(t) for t in topics}
    led = collections.Counter(n for t in topics for n in before[t].values())
    victim = led.most_common(1)[0][0]
    moved = [(t, p) for t in topics for p, n in before[t].items() if n == victim]
    assert moved  # the fault has something to move
    assert not client.get_job_execution_result().done(), "the job ended before the fault"
    stopped_at = progress.epochs_run
    cluster.stop_node(victim)
    _until(
        lambda: all(cluster.leaders(t)[p] not in (victim, -1) for t, p in moved),
        f"leaders of {moved} moved off node {victim}",
    )
    time.sleep(2)
    cluster.start_node(victim)
    preferred = {t: {p: r[0] for p, r in cluster.replicas(t).items()} for t in topics}

    def elected() -> bool:
        try:
            cluster.elect_preferred_leaders()
        except RuntimeError:
            return False  # a replica not yet back in sync: try again
        return all(cluster.leaders(t) == preferred[t] for t in topics)

    _until(elected, "preferred leaders elected", timeout=120)
    assert any(preferred[t][p] == victim for t, p in moved)  # leadership came back to it
    restarted_at = progress.epochs_run
    assert not client.get_job_execution_result().done(), "the job ended during the moves"

    client.wait(timeout=600)
    assert client.job_master.status == "FINISHED"
    assert progress.epochs_run > restarted_at >= stopped_at  # it ran on after the moves
    got = collections.Counter(read_committed(bootstrap, sink))
    expected = expected_output(N)
    missing, extra = expected - got, got - expected
    assert (sum(missing.values()), sum(extra.values())) == (0, 0), (
        f"missing {sorted(missing)[:5]}, duplicated or unexpected {sorted(extra)[:5]}"
    )
    assert got == expected
    assert open_transactions(bootstrap, name, {sink: 2}) == []
