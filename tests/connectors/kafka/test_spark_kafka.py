"""``SparkStreamSource`` over Spark's own Kafka source (``spark.readStream.format("kafka")``,
connector 4.2.0 from Maven Central on the shared Spark 4.3.0 session) against the real broker:
a keyed running sum written by sparkpoint's ``KafkaSink`` EXACTLY_ONCE. The first job fails on
an injected fault with a batch staged and not applied; a second job, restored from the first
one's latest checkpoint on the same Spark checkpoint, applies it once: every sum once, none
missing, no transaction left open."""

from __future__ import annotations

import collections
import os
import time
from typing import Any

import pytest

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
    check_exact,
    checkpoint_positions,
    expected_output,
    latest_checkpoint,
    open_transactions,
    read_committed,
)
from tests.fixtures.kafka import KafkaBroker, ordered_producer
from tests.runtime.jobs.driver_process import checkpointed_env

FIRST = 1000
# At most 500 records per micro-batch: Spark spreads the limit over the partitions by their
# backlog (125 records of each of the four), so batch 0 is x < 500 and batch 1 the rest of
# the first 1000; the 500 records produced for the second job are batch 2.
PER_TRIGGER = 500
PREFIX = "spark-kafka"


def _produce(bootstrap: str, topic: str, xs: range) -> None:
    """Record ``x`` is ``"<x % KEYS>,<x>"`` in partition ``x % PARTITIONS`` (kafka_jobs' input)."""
    producer = ordered_producer(bootstrap)
    for x in xs:
        producer.produce(topic, f"{x % KEYS},{x}".encode(), partition=x % PARTITIONS)
    assert producer.flush(60) == 0


class HoldUntilCheckpointed:
    """``on_batch_staged`` hook: after batch 0 is staged, keep Spark's query in its
    ``foreachBatch`` (so batch 1 is not staged) until a completed sparkpoint checkpoint
    covers batch 0. A checkpoint completes when a later epoch reports its asynchronous
    uploads done; without the hold, the epoch reading batch 1 (and failing) comes first."""

    def __init__(self, ckpt: str, timeout: float = 60.0) -> None:
        self.ckpt = ckpt
        self.timeout = timeout
        self.positions: list[int] | None = None  # what the checkpoint it waited for holds

    def __call__(self, batch_id: int) -> None:
        if batch_id != 0:
            return
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                latest = latest_checkpoint(self.ckpt)
                positions = checkpoint_positions(self.ckpt, int(latest.rsplit("-", 1)[1]))
            except Exception:  # none yet, or one being retired while it is read
                positions = [0]
            if positions[0] >= 1:
                self.positions = positions
                return
            time.sleep(0.05)


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
    bootstrap: str,
    tmp: Any,
    end_batch: int,
    restore: str,
    injector: FailureInjector | None,
    hold: HoldUntilCheckpointed | None,
) -> Any:
    """Spark's Kafka source -> parse -> key_by -> running sum -> KafkaSink EXACTLY_ONCE;
    no restart: an injected failure fails the job."""
    source = SparkStreamSource(
        _kafka_df(spark, bootstrap, "spark-in"),
        str(tmp / "staged"),
        str(tmp / "spark-ckpt"),
        trigger_interval="100 milliseconds",
        end_batch=end_batch,
    )
    source.on_batch_staged = hold
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
        .set_transactional_id_prefix(PREFIX)
        .build()
    )
    env = checkpointed_env(spark, str(tmp / "ckpt"), restore, {})
    env.set_restart_strategy(RestartStrategies.no_restart())
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


def test_spark_kafka_source_exactly_once_across_failure_and_restore(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Any
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic("spark-in", PARTITIONS)
    kafka_broker.create_topic("spark-out", 2)
    _produce(bootstrap, "spark-in", range(FIRST))
    ckpt = str(tmp_path / "ckpt")

    # Job 1: batch 0 (x < 500) is applied and checkpointed; every attempt Spark makes of the
    # task reading x = 700 (batch 1) fails, and the job fails with batch 1 staged (and in
    # Spark's commit log) but not applied: only batch 0's sums are committed.
    injector = FailureInjector(str(tmp_path / "fault"), 700, times=1000)
    hold = HoldUntilCheckpointed(ckpt)
    with pytest.raises(JobExecutionError, match="injected failure at record 700"):
        _run(spark, bootstrap, tmp_path, 1, "-", injector, hold)
    assert injector.fired() == 4  # local[2,4]: four attempts, no restart
    assert hold.positions == [1]
    restore = latest_checkpoint(ckpt)
    assert checkpoint_positions(ckpt, int(restore.rsplit("-", 1)[1])) == [1]
    assert sorted(os.listdir(tmp_path / "staged")) == ["_tmp", "batch-0", "batch-1"]
    assert collections.Counter(read_committed(bootstrap, "spark-out")) == expected_output(500)
    assert open_transactions(kafka_broker, PREFIX, {"spark-out": 2}) == []

    # Job 2: 500 more records arrive; a new job restored from job 1's latest checkpoint and
    # on Spark's checkpoint applies batch 1 (staged by job 1) and batch 2 (staged now, by
    # Spark resuming after its committed batch 1), into the restored running sums.
    _produce(bootstrap, "spark-in", range(FIRST, FIRST + PER_TRIGGER))
    _run(spark, bootstrap, tmp_path, 2, restore, None, None)
    assert sorted(os.listdir(tmp_path / "staged"))[1:] == [f"batch-{b}" for b in range(3)]
    check_exact(kafka_broker, "spark-out", PREFIX, FIRST + PER_TRIGGER)
