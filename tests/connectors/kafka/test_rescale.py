"""Kafka → key_by/reduce → Kafka, EXACTLY_ONCE, rescaled 2 → 3 → 1 through savepoints on an
8-partition topic: every split's offset carries over through each savepoint, every key's
running sum is restored through its key group at the new parallelism, and a
``read_committed`` consumer reads every expected record exactly once."""

from __future__ import annotations

import collections
import os
from typing import Any

from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_metadata
from sparkpoint.runtime.driver.master_state import JobMasterState
from tests.connectors.kafka.kafka_jobs import expected_output, kafka_sum_job, read_committed
from tests.connectors.kafka.source_jobs import produce, run_epochs, source_env
from tests.fixtures.kafka import KafkaBroker
from tests.fixtures.kafka_tools import open_transactions

PARTITIONS = 8
KEYS = 8  # as kafka_jobs: record x is "<x % 8>,<x>", so each key lives in one partition
N = 8000  # 1000 records per partition: ten epochs of 100 records per split


def _run_and_stop(env: Any, name: str, epochs: int) -> str:
    """Run the job for ``epochs`` epochs, then stop it with a savepoint; its path."""
    client = env.execute_async(name)
    run_epochs(client, epochs)
    savepoint = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    assert client.job_master.status == "FINISHED"
    return str(savepoint)


def _positions(savepoint: str) -> dict[str, int]:
    directory = savepoint.removeprefix("file://")
    with open(os.path.join(directory, "_metadata"), "rb") as f:
        master = JobMasterState.from_metadata(load_checkpoint_metadata(f.read(), directory))
    assert master is not None
    return {s["split_id"]: s["position"] for s in master.sources["source"]}


def _check_exact(broker: KafkaBroker, sink: str, prefix: str) -> None:
    got = collections.Counter(read_committed(broker.bootstrap_servers, sink))
    assert sum(got.values()) == N
    assert got == expected_output(N)
    assert open_transactions(broker.bootstrap_servers, prefix, {sink: 2}) == []


def test_rescale_2_3_1_through_savepoints(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    name = "rescale"
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = f"{name}-in", f"{name}-out"
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(sink, 2)
    produce(bootstrap, source, [(x % PARTITIONS, f"{x % KEYS},{x}", None) for x in range(N)])

    env = source_env(spark, tmp_path, per_split=100, parallelism=2)
    kafka_sum_job(env, bootstrap, source, sink, name)
    first = _run_and_stop(env, f"{name}-2", epochs=1)
    at_first = _positions(first)
    assert sorted(at_first) == [f"{source}-{p}" for p in range(PARTITIONS)]
    written = len(read_committed(bootstrap, sink))
    # Every split read the same epochs: the output holds exactly what they read.
    assert written == sum(at_first.values()) and 0 < written < N, at_first

    env = source_env(spark, tmp_path, per_split=100, restore=first, parallelism=3)
    kafka_sum_job(env, bootstrap, source, sink, name)
    second = _run_and_stop(env, f"{name}-3", epochs=1)
    at_second = _positions(second)
    assert all(at_second[k] > at_first[k] for k in at_first), (at_first, at_second)
    more = len(read_committed(bootstrap, sink))
    assert more == sum(at_second.values()) and written < more < N, (at_first, at_second)

    env = source_env(spark, tmp_path, per_split=100, restore=second, parallelism=1)
    kafka_sum_job(env, bootstrap, source, sink, name)
    result = env.execute(f"{name}-1")
    assert result.records_in == N - more
    _check_exact(kafka_broker, sink, name)
