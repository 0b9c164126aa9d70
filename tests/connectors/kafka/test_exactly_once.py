"""Kafka → key_by/reduce → Kafka, EXACTLY_ONCE, against the real broker: a ``read_committed``
consumer reads every expected record exactly once, with and without an injected failure, and
across a stop-with-savepoint and restore; no transaction of the job is left open."""

from __future__ import annotations

import time
from typing import Any

from sparkpoint.testing import FailureInjector
from tests.connectors.kafka.kafka_jobs import (
    check_exact,
    check_restored_offsets,
    create_topics,
    job_env,
    kafka_sum_job,
    read_committed,
    record_restored_positions,
)
from tests.fixtures.kafka import KafkaBroker

N = 4000  # 1000 records per partition


def _env(spark: Any, tmp_path: Any, per_split: int, restore: str | None = None) -> Any:
    return job_env(spark, tmp_path, per_split, restore)


def _topics(broker: KafkaBroker, name: str) -> tuple[str, str]:
    return create_topics(broker, name, N)


def _check(broker: KafkaBroker, sink: str, prefix: str) -> None:
    check_exact(broker, sink, prefix, N)


def test_kafka_to_kafka_exactly_once(spark: Any, tmp_path: Any, kafka_broker: KafkaBroker) -> None:
    source, sink = _topics(kafka_broker, "eo-plain")
    env = _env(spark, tmp_path, per_split=250)
    kafka_sum_job(env, kafka_broker.bootstrap_servers, source, sink, "eo-plain")
    t0 = time.monotonic()
    result = env.execute("kafka-eo")
    print(f"kafka exactly-once job: {time.monotonic() - t0:.1f} s")
    assert any(s.status == "COMPLETED" for s in result.checkpoints)
    _check(kafka_broker, sink, "eo-plain")


def test_user_exception_after_first_checkpoint(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    """Record 2401 is offset 600 of partition 1: the third epoch, after two checkpoints.
    Four failures exhaust Spark's task attempts, so the job restores from a checkpoint."""
    source, sink = _topics(kafka_broker, "eo-fail")
    inj = FailureInjector(str(tmp_path / "inj"), 2401, times=4)
    env = _env(spark, tmp_path, per_split=250)
    positions = record_restored_positions(env, tmp_path)
    kafka_sum_job(env, kafka_broker.bootstrap_servers, source, sink, "eo-fail", injector=inj)
    result = env.execute("kafka-eo-fail")
    assert inj.fired() == 4
    assert result.restarts == 1
    check_restored_offsets(result, positions)
    _check(kafka_broker, sink, "eo-fail")


def test_restore_from_savepoint_continues_from_saved_offsets(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    source, sink = _topics(kafka_broker, "eo-savepoint")
    env = _env(spark, tmp_path, per_split=100)
    kafka_sum_job(env, kafka_broker.bootstrap_servers, source, sink, "eo-savepoint")
    client = env.execute_async("kafka-savepoint")
    master = client.job_master
    while master.progress.epochs_run < 3:
        assert not client.get_job_execution_result().done(), "job ended before the stop"
        time.sleep(0.05)
    savepoint = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    assert master.status == "FINISHED"
    first = len(read_committed(kafka_broker.bootstrap_servers, sink))
    assert 0 < first < N

    env = _env(spark, tmp_path, per_split=100, restore=str(savepoint))
    kafka_sum_job(env, kafka_broker.bootstrap_servers, source, sink, "eo-savepoint")
    env.execute("kafka-savepoint-resumed")
    _check(kafka_broker, sink, "eo-savepoint")
