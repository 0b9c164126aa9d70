"""``TransactionAdmin`` on kafka-python's client against the real broker: one transactional
id its coordinator does not know (expired, never used) fails no other in a batch of
``DescribeTransactions`` and ``EndTxn``."""

from __future__ import annotations

import dataclasses
import time

from confluent_kafka import Producer

from sparkpoint.connectors.kafka_transactions import OpenTransaction, TransactionAdmin
from tests.fixtures.kafka import KafkaBroker


def test_an_unknown_transactional_id_fails_no_other(kafka_broker: KafkaBroker) -> None:
    topic = "admin-batch"
    kafka_broker.create_topic(topic, 1)
    admin = TransactionAdmin(kafka_broker.bootstrap_servers)
    try:
        p = Producer(
            {"bootstrap.servers": kafka_broker.bootstrap_servers, "transactional.id": "batch-1"}
        )
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"x")
        assert p.flush(30) == 0
        unknown = OpenTransaction("batch-never-used", 12345, 0, "Ongoing")
        described = admin.describe_all(["batch-1", "batch-never-used"])
        assert list(described) == ["batch-1"] and described["batch-1"].state == "Ongoing"
        assert admin.describe_or_none("batch-never-used") is None
        # Aborting nothing is done; committing it is that id's error alone.
        assert admin.end_all([unknown], commit=False) == [None]
        # Without a start time (INCREMENTING's committables) no describe precedes the
        # EndTxn: the unknown id is still told apart, and the open transaction commits.
        undated = dataclasses.replace(described["batch-1"], transaction_start_time_ms=-1)
        ended = admin.end_all([unknown, undated], commit=True)
        assert ended == ["TRANSACTIONAL_ID_NOT_FOUND", None]
        deadline = time.monotonic() + 30
        while admin.describe("batch-1").state != "CompleteCommit":
            assert time.monotonic() < deadline, admin.describe("batch-1")
            time.sleep(0.05)
    finally:
        admin.close()
