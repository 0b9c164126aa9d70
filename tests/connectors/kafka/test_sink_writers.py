"""``KafkaSink``'s writers on the sink contract, without Spark: EXACTLY_ONCE output is
invisible until the driver commits; a retried epoch fences what its failed attempt left open;
a commit redone after a restore is a no-op; AT_LEAST_ONCE is readable after the epoch."""

from __future__ import annotations

from sparkpoint.common import SimpleStringSchema
from sparkpoint.connectors.kafka_transactions import TransactionAdmin
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
)
from tests.connectors.kafka.kafka_jobs import read_committed
from tests.fixtures.kafka import KafkaBroker


def _sink(broker: KafkaBroker, topic: str, guarantee: DeliveryGuarantee) -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(topic)
        .build()
    )


def _ongoing(broker: KafkaBroker, prefix: str) -> list[str]:
    admin = TransactionAdmin(broker.bootstrap_servers)
    try:
        return [t for t in admin.list_ongoing() if t.startswith(prefix + "-")]
    finally:
        admin.close()


def test_exactly_once_commit_fence_and_recommit(kafka_broker: KafkaBroker) -> None:
    topic = "sink-eo"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    w = sink.create_writer("job", 1, 0, 1, 0)
    w.write(["a", "b"])
    epoch1 = w.prepare_commit()
    assert _ongoing(kafka_broker, topic) == [f"{topic}-0-1"]
    # A failed attempt of epoch 2 leaves its transaction open; the retry fences it.
    failed = sink.create_writer("job", 2, 0, 1, 0)
    failed.write(["lost"])
    failed.prepare_commit()
    retry = sink.create_writer("job", 2, 0, 1, 1)
    assert _ongoing(kafka_broker, topic) == [f"{topic}-0-1"]
    retry.write(["c"])
    epoch2 = retry.prepare_commit()
    assert read_committed(kafka_broker.bootstrap_servers, topic, timeout=3) == []
    sink.commit(epoch1 + epoch2)
    sink.commit(epoch1)  # a restore redoes the commit: nothing changes
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["a", "b", "c"]
    assert _ongoing(kafka_broker, topic) == []


def test_exactly_once_abort_and_downscale(kafka_broker: KafkaBroker) -> None:
    topic = "sink-eo-abort"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.EXACTLY_ONCE)
    aborted = sink.create_writer("job", 1, 0, 2, 0)
    aborted.write(["x"])
    sink.abort(aborted.prepare_commit())
    orphan = sink.create_writer("job", 1, 1, 2, 0)
    orphan.write(["y"])
    orphan.prepare_commit()  # subtask 1's output, never committed: the job rescales to 1
    w = sink.create_writer("job", 2, 0, 1, 0)
    w.write(["z"])
    sink.commit(w.prepare_commit())
    assert read_committed(kafka_broker.bootstrap_servers, topic) == ["z"]
    assert _ongoing(kafka_broker, topic) == []


def test_at_least_once_flushes_at_the_epoch_end(kafka_broker: KafkaBroker) -> None:
    topic = "sink-alo"
    kafka_broker.create_topic(topic, 1)
    sink = _sink(kafka_broker, topic, DeliveryGuarantee.AT_LEAST_ONCE)
    assert not sink.transactional
    w = sink.create_writer("job", 1, 0, 1, 0)
    w.write([str(i) for i in range(1000)])
    assert w.prepare_commit() == []
    assert read_committed(kafka_broker.bootstrap_servers, topic) == [str(i) for i in range(1000)]
