"""``SparkStreamSource`` over Spark's own Kafka source (``spark.readStream.format("kafka")``,
the connector jar from Maven Central on the shared session): a keyed job writes to sparkpoint's
``KafkaSink`` EXACTLY_ONCE. The first run fails over, then fails for good with a batch staged
and not applied; a second run restored from its latest checkpoint on the same Spark
checkpoint applies it once: every running sum once, none missing."""

from __future__ import annotations

import collections
import os
from typing import Any

import pytest
from confluent_kafka import Producer

from sparkpoint.common import RestartStrategies, SimpleStringSchema
from sparkpoint.connectors.spark_source import SparkStreamSource
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
)
from sparkpoint.errors import JobExecutionError
from sparkpoint.testing import FailureInjector
from tests.connectors.kafka.kafka_jobs import (
    KEYS,
    PARTITIONS,
    Parse,
    expected_output,
    read_committed,
)
from tests.fixtures.kafka import KafkaBroker
from tests.runtime.jobs.driver_process import checkpointed_env, latest_checkpoint

HALF = 1000
# Two micro-batches per half: Spark spreads the limit over the partitions by their backlog
# (125 records of each of the four per batch).
PER_TRIGGER = HALF // 2


def _produce(bootstrap: str, topic: str, xs: range) -> None:
    """Record ``x`` is ``"<x % KEYS>,<x>"`` in partition ``x % PARTITIONS`` (kafka_jobs' input)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    for x in xs:
        producer.produce(topic, f"{x % KEYS},{x}".encode(), partition=x % PARTITIONS)
    assert producer.flush(60) == 0


def _line(row: Any) -> str:
    return str(row["line"])


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0], a[1] + b[1]


def _format(kv: tuple[int, int]) -> str:
    return f"{kv[0]},{kv[1]}"


def _kafka_df(spark: Any, bootstrap: str, topic: str) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", PER_TRIGGER)
        .load()
        .selectExpr("CAST(value AS STRING) AS line")
    )


def _run(
    spark: Any,
    broker: KafkaBroker,
    tmp: Any,
    end_batch: int,
    restore: str,
    injector: FailureInjector | None,
) -> Any:
    """Spark's Kafka source -> parse -> key_by -> running sum -> KafkaSink EXACTLY_ONCE."""
    bootstrap = broker.bootstrap_servers
    source = SparkStreamSource(
        _kafka_df(spark, bootstrap, "spark-in"),
        str(tmp / "staged"),
        str(tmp / "spark-ckpt"),
        trigger_interval="100 milliseconds",
        end_batch=end_batch,
        max_batches_per_epoch=1,
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic("spark-out")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("spark-kafka")
        .build()
    )
    env = checkpointed_env(spark, str(tmp / "ckpt"), restore, {})
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 100))
    (
        env.from_source(source, None, "spark-kafka")
        .uid("spark-kafka")
        .map(_line)
        .map(Parse(injector))
        .key_by(lambda kv: kv[0])
        .reduce(_add)
        .uid("sum")
        .map(_format)
        .sink_to(sink)
        .uid("sink")
    )
    try:
        return env.execute("spark-kafka")
    finally:
        source.stop()


def test_spark_kafka_source_exactly_once_across_failover_and_restore(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Any
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic("spark-in", PARTITIONS)
    kafka_broker.create_topic("spark-out", 2)
    _produce(bootstrap, "spark-in", range(HALF))

    # Run 1: batch 0 holds x < 500 (offsets 0-124 of each partition), batch 1 the rest of
    # the first half. Every attempt at x = 700 (batch 1) fails: Spark tries each task four
    # times, the job fails over once, restores from its checkpoint of batch 0 and fails
    # again: the job fails with batch 1 staged (and committed by Spark) but not applied.
    injector = FailureInjector(str(tmp_path / "fault"), 700, times=1000)
    with pytest.raises(JobExecutionError, match="injected failure"):
        _run(spark, kafka_broker, tmp_path, 1, "-", injector)
    assert injector.fired() == 8
    assert sorted(os.listdir(tmp_path / "staged")) == ["_tmp", "batch-0", "batch-1"]
    assert collections.Counter(read_committed(bootstrap, "spark-out")) == expected_output(500)

    # Run 2: the second half arrives; a new job restored from run 1's latest checkpoint and
    # on Spark's checkpoint applies batch 1 (staged by run 1) and batches 2 and 3 (staged
    # now, by Spark resuming after its committed batch 1), into the restored running sums.
    _produce(bootstrap, "spark-in", range(HALF, 2 * HALF))
    _run(spark, kafka_broker, tmp_path, 3, latest_checkpoint(tmp_path / "ckpt"), None)
    assert sorted(os.listdir(tmp_path / "staged"))[1:] == [f"batch-{b}" for b in range(4)]
    assert collections.Counter(read_committed(bootstrap, "spark-out")) == expected_output(2 * HALF)
