"""``SparkStreamSource`` over Spark's own Kafka source (``spark.readStream.format("kafka")``,
the connector jar from Maven Central on the shared session): a keyed job writes to sparkpoint's
``KafkaSink`` EXACTLY_ONCE; a failover mid-stream, then a second run restored from the first
run's latest checkpoint on the same Spark checkpoint: every running sum once, none missing."""

from __future__ import annotations

import collections
import os
from typing import Any

from confluent_kafka import Producer

from sparkpoint.common import SimpleStringSchema
from sparkpoint.connectors.spark_source import SparkStreamSource
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
)
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

    # Run 1: batches 0 and 1 (the first half); every attempt of the task reading x = 700
    # (batch 1) fails, so the job fails over and restores from its checkpoint of batch 0.
    injector = FailureInjector(str(tmp_path / "fault"), 700, times=4)
    result = _run(spark, kafka_broker, tmp_path, 1, "-", injector)
    assert injector.fired() == 4 and result.restarts == 1
    staged = sorted(os.listdir(tmp_path / "staged"))
    assert staged == ["_tmp", "batch-0", "batch-1"]
    assert collections.Counter(read_committed(bootstrap, "spark-out")) == expected_output(HALF)

    # Run 2: the second half arrives; a new job restored from run 1's latest checkpoint and
    # Spark's checkpoint reads batches 2 and 3 only, into the restored running sums.
    _produce(bootstrap, "spark-in", range(HALF, 2 * HALF))
    _run(spark, kafka_broker, tmp_path, 3, latest_checkpoint(tmp_path / "ckpt"), None)
    assert sorted(os.listdir(tmp_path / "staged"))[1:] == [f"batch-{b}" for b in range(4)]
    assert collections.Counter(read_committed(bootstrap, "spark-out")) == expected_output(2 * HALF)
