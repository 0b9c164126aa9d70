"""Hanging transactions against the real broker: a transaction its coordinator ended whose
partition has no marker (what a broker restarted between a commit's ``PrepareCommit`` and its
markers leaves, ``kafka_hanging``). The state is made on purpose: with the broker's partition
verification off for a moment, records of an ended transaction's producer id and epoch are
appended without the coordinator (a raw ``Produce``, ``hanging_state``), so the partition has
an open transaction the coordinator has ended. The sink's sweep ends it as the coordinator decided
(POOLING's only reported); a live transaction and another application's are left alone."""

from __future__ import annotations

import logging
from typing import Any

from sparkpoint.common import SimpleStringSchema
from sparkpoint.connectors.kafka_hanging import complete_hanging
from sparkpoint.connectors.kafka_transactions import TransactionAdmin
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
    TransactionNamingStrategy,
)
from tests.connectors.kafka.hanging_state import append_without_coordinator, transaction
from tests.connectors.kafka.kafka_jobs import read_committed
from tests.fixtures.kafka import KafkaBroker


def _transaction(bootstrap: str, tid: str, topic: str, values: list[bytes], commit: bool) -> None:
    transaction({"bootstrap.servers": bootstrap}, tid, topic, values, commit)


def _append_without_coordinator(bootstrap: str, tid: str, topic: str, values: list[bytes]) -> None:
    append_without_coordinator({"bootstrap.servers": bootstrap}, tid, topic, values)


def _sink(
    bootstrap: str,
    prefix: str,
    topic: str,
    naming: TransactionNamingStrategy = TransactionNamingStrategy.INCREMENTING,
) -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(prefix)
        .set_transaction_naming_strategy(naming)
        .build()
    )


def test_sweep_commits_a_committed_transaction_left_hanging(kafka_broker: KafkaBroker) -> None:
    """Committed at its coordinator, open in its partition: ``read_committed`` reads nothing
    after it until the sink's sweep writes its COMMIT marker; then every record once."""
    boot, topic = kafka_broker.bootstrap_servers, "hanging-commit"
    kafka_broker.create_topic(topic, 1)
    _transaction(boot, "hang-c-0-0", topic, [b"a"], commit=True)
    _append_without_coordinator(boot, "hang-c-0-0", topic, [b"b1", b"b2"])
    _transaction(boot, "hang-c-1-0", topic, [b"c"], commit=True)  # behind the hanging one
    assert read_committed(boot, topic, timeout=10) == ["a"]  # the fault is in place
    sink = _sink(boot, "hang-c", topic)
    assert sink.abort_lingering([]) == []
    (hanging,) = sink.hanging_completed
    assert (hanging.transactional_id, hanging.open.topic, hanging.committed) == (
        "hang-c-0-0",
        topic,
        True,
    )
    assert sorted(read_committed(boot, topic, timeout=10)) == ["a", "b1", "b2", "c"]
    sink.abort_lingering([])  # nothing left to do
    assert len(sink.hanging_completed) == 1


def test_sweep_aborts_an_aborted_transaction_left_hanging(kafka_broker: KafkaBroker) -> None:
    """Aborted at its coordinator, open in its partition: the sweep writes an ABORT marker,
    so those records stay invisible and the records behind them are read."""
    boot, topic = kafka_broker.bootstrap_servers, "hanging-abort"
    kafka_broker.create_topic(topic, 1)
    _transaction(boot, "hang-a-0-0", topic, [b"x"], commit=False)
    _append_without_coordinator(boot, "hang-a-0-0", topic, [b"y"])
    _transaction(boot, "hang-a-1-0", topic, [b"z"], commit=True)
    assert read_committed(boot, topic, timeout=10) == []
    sink = _sink(boot, "hang-a", topic)
    sink.abort_lingering([])
    assert [(h.transactional_id, h.committed) for h in sink.hanging_completed] == [
        ("hang-a-0-0", False)
    ]
    assert read_committed(boot, topic, timeout=10) == ["z"]


def test_pooling_sweep_reports_a_hanging_transaction(
    kafka_broker: KafkaBroker, caplog: Any
) -> None:
    """POOLING's ids carry one transaction after another and their coordinator keeps only
    the latest's decision: the sweep names the hanging transaction and writes no marker."""
    boot, topic = kafka_broker.bootstrap_servers, "hanging-pooling"
    kafka_broker.create_topic(topic, 1)
    _transaction(boot, "hang-p-0-0", topic, [b"a"], commit=True)
    _append_without_coordinator(boot, "hang-p-0-0", topic, [b"b"])
    sink = _sink(boot, "hang-p", topic, TransactionNamingStrategy.POOLING)
    with caplog.at_level(logging.WARNING, logger="sparkpoint.kafka"):
        sink.abort_lingering([])
    assert sink.hanging_completed == []
    assert "not ended" in caplog.text and "('hang-p-0-0', 'hanging-pooling', 0)" in caplog.text
    assert read_committed(boot, topic, timeout=10) == ["a"]
    admin = TransactionAdmin(boot)
    try:  # the state was real: ended here, once it is this call's to end
        (found,) = complete_hanging(admin, [topic], lambda tid: tid.startswith("hang-p-"))
    finally:
        admin.close()
    assert found.transactional_id == "hang-p-0-0"
    assert read_committed(boot, topic, timeout=10) == ["a", "b"]


def test_live_and_foreign_transactions_are_left_alone(kafka_broker: KafkaBroker) -> None:
    """An ongoing transaction of the sink (a task writing the next epoch) and a hanging one
    of another prefix get no marker."""
    from confluent_kafka import Producer

    boot, topic = kafka_broker.bootstrap_servers, "hanging-others"
    kafka_broker.create_topic(topic, 1)
    _transaction(boot, "other-0-0", topic, [b"o1"], commit=True)
    _append_without_coordinator(boot, "other-0-0", topic, [b"o2"])
    live = Producer({"bootstrap.servers": boot, "transactional.id": "hang-l-0-0", "log_level": 0})
    live.init_transactions(30)
    live.begin_transaction()
    live.produce(topic, b"l", partition=0)
    assert live.flush(30) == 0
    admin = TransactionAdmin(boot)
    try:
        assert complete_hanging(admin, [topic], lambda tid: tid.startswith("hang-l-")) == []
        assert admin.describe("hang-l-0-0").state == "Ongoing"
        live.commit_transaction(30)
        assert read_committed(boot, topic, timeout=10) == ["o1"]  # still blocked by "other"
        # The other application's, once it is this call's to end: the state was real.
        (other,) = complete_hanging(admin, [topic], lambda tid: tid.startswith("other-"))
        assert (other.transactional_id, other.committed) == ("other-0-0", True)
    finally:
        admin.close()
    assert sorted(read_committed(boot, topic, timeout=10)) == ["l", "o1", "o2"]
