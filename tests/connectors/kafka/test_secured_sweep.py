"""The sink's sweep as an application's principal on a secured broker
(``tests.fixtures.kafka_secured``: SASL_SSL, SCRAM-SHA-512, ACLs enforced), with a
transaction the broker left hanging in its topic (``hanging_state``, made as the admin):
without ClusterAction (nor Alter) on the cluster the repair logs one warning naming the
transaction and the right, however many sweeps run; with the sweep's own check refused
(no Read on the topic: ``DescribeProducers``) it logs that and the next sweep, once the
rights are there, ends the transaction. The commits they follow succeed either way, which
the output shows once the hanging transaction is ended."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from sparkpoint.common import SimpleStringSchema
from sparkpoint.connectors.kafka_hanging import complete_hanging
from sparkpoint.connectors.kafka_transactions import TransactionAdmin
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
)
from tests.connectors.kafka.hanging_state import append_without_coordinator, transaction
from tests.connectors.kafka.kafka_jobs import read_committed
from tests.fixtures.kafka_secured import ADMIN, JOB, SecuredKafkaBroker

pytestmark = pytest.mark.spark  # a broker JVM (and Kafka's own tools)

CLUSTER_ACTION = [("BROKER", "kafka-cluster", "LITERAL", "CLUSTER_ACTION")]


def _sink_acls(name: str, read: bool = True) -> list[tuple[str, str, str, str]]:
    """What docs/kafka-sink.md says the sink's principal needs on topic ``name`` with
    transactional ids prefixed ``name`` (without Read: no ``DescribeProducers``)."""
    acls = [
        ("TOPIC", name, "LITERAL", "WRITE"),
        ("TOPIC", name, "LITERAL", "DESCRIBE"),
        ("TRANSACTIONAL_ID", name, "PREFIXED", "WRITE"),
        ("TRANSACTIONAL_ID", name, "PREFIXED", "DESCRIBE"),
    ]
    return [*acls, ("TOPIC", name, "LITERAL", "READ")] if read else acls


def _props(broker: SecuredKafkaBroker, user: tuple[str, str]) -> dict[str, str]:
    return {"bootstrap.servers": broker.bootstrap_servers, **broker.java_properties(user)}


def _sink(broker: SecuredKafkaBroker, name: str) -> KafkaSink:
    """An EXACTLY_ONCE sink (INCREMENTING: a fresh id per transaction) as the job."""
    builder = KafkaSink.builder().set_bootstrap_servers(broker.bootstrap_servers)
    for key, value in broker.java_properties(JOB).items():
        builder.set_property(key, value)
    return (
        builder.set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(name)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(name)
        .build()
    )


def _hanging(broker: SecuredKafkaBroker, name: str) -> None:
    """Topic ``name`` with ``a`` committed, then ``b`` of the same transaction hanging
    (``<name>-0-0``: committed at its coordinator, open in the partition)."""
    admin = _props(broker, ADMIN)
    broker.create_topic(name, 1)
    transaction(admin, f"{name}-0-0", name, [b"a"], commit=True)
    append_without_coordinator(admin, f"{name}-0-0", name, [b"b"])
    assert _read(broker, name) == ["a"]  # the fault is in place


def _read(broker: SecuredKafkaBroker, topic: str) -> list[str]:
    """``topic`` as the admin's ``read_committed`` consumer reads it (librdkafka)."""
    return sorted(read_committed(broker.bootstrap_servers, topic, 10, broker.client_config()))


def _epoch(sink: KafkaSink, epoch: int, value: str) -> str:
    """One epoch of subtask 0 written, prepared and committed by the driver's path; its
    transactional id."""
    writer = sink.create_writer("job", epoch, 0, 1, 0)
    writer.write([value])
    [committable] = writer.prepare_commit()
    sink.commit([committable])
    return str(committable["transactional_id"])


def _state(broker: SecuredKafkaBroker, tid: str) -> str:
    """``tid``'s state by Kafka's own ``kafka-transactions.sh describe``."""
    header, row = broker.kafka_transactions("describe", "--transactional-id", tid).splitlines()[:2]
    return dict(zip(header.split(), row.split(), strict=False))["TransactionState"]


def _warnings(caplog: Any) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("sparkpoint") and r.levelno >= logging.WARNING
    ]


@pytest.fixture
def granted(secured_kafka_broker: SecuredKafkaBroker) -> Iterator[list[Any]]:
    """ACLs a test grants the job's principal (appended), revoked after it."""
    acls: list[Any] = []
    yield acls
    if acls:
        secured_kafka_broker.revoke(acls)


def test_hanging_without_cluster_action_warns_once(
    secured_kafka_broker: SecuredKafkaBroker, granted: list[Any], caplog: Any
) -> None:
    broker, name = secured_kafka_broker, "sweep-noaction"
    _hanging(broker, name)
    granted += _sink_acls(name)
    broker.grant(granted)
    sink = _sink(broker, name)
    with caplog.at_level(logging.WARNING, logger="sparkpoint"):
        committed = []
        for epoch in (1, 2, 3):
            committed.append(_epoch(sink, epoch, f"e{epoch}"))
            assert sink.abort_lingering([]) == []  # the sweep after the commit
    [warning] = _warnings(caplog)
    assert f"('{name}-0-0', '{name}', 0)" in warning
    assert "could not be ended" in warning and "ClusterAction on the Cluster" in warning
    assert sink.hanging_completed == []
    # Every commit went through (Kafka's own tool), behind the transaction still hanging.
    assert [_state(broker, tid) for tid in committed] == ["CompleteCommit"] * 3
    assert _read(broker, name) == ["a"]
    admin = TransactionAdmin(_props(broker, ADMIN))
    try:  # the administrator's remedy, which the warning names
        [ended] = complete_hanging(admin, [name], lambda tid: tid == f"{name}-0-0")
    finally:
        admin.close()
    assert (ended.transactional_id, ended.committed) == (f"{name}-0-0", True)
    assert _read(broker, name) == ["a", "b", "e1", "e2", "e3"]


def test_sweep_refused_does_not_fail_the_commit_and_is_retried(
    secured_kafka_broker: SecuredKafkaBroker, granted: list[Any], caplog: Any
) -> None:
    broker, name = secured_kafka_broker, "sweep-refused"
    _hanging(broker, name)
    granted += _sink_acls(name, read=False)
    broker.grant(granted)
    sink = _sink(broker, name)
    with caplog.at_level(logging.WARNING, logger="sparkpoint"):
        first = _epoch(sink, 1, "e1")
        assert sink.abort_lingering([]) == []
    [warning] = _warnings(caplog)
    assert warning.startswith(f"Could not check {{'{name}'}} for hanging Kafka transactions")
    assert f"Kafka refused DescribeProducers for '{name}'" in warning
    assert f"needs the ACL Read on Topic '{name}'" in warning
    assert _state(broker, first) == "CompleteCommit"
    caplog.clear()
    # The rights granted, the next sweep (after the next commit) does the repair.
    broker.grant([("TOPIC", name, "LITERAL", "READ"), *CLUSTER_ACTION])
    granted += [("TOPIC", name, "LITERAL", "READ"), *CLUSTER_ACTION]
    with caplog.at_level(logging.WARNING, logger="sparkpoint"):
        _epoch(sink, 2, "e2")
        assert sink.abort_lingering([]) == []
    [ended] = sink.hanging_completed
    assert (ended.transactional_id, ended.committed) == (f"{name}-0-0", True)
    [warning] = _warnings(caplog)
    assert warning.startswith("Ended 1 Kafka transactions the broker left hanging")
    assert _read(broker, name) == ["a", "b", "e1", "e2"]
