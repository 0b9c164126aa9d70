"""The tests' oracle for open transactions (``tests/fixtures/kafka_tools.py``: Kafka's own
``kafka-transactions.sh``) sees what it must: a transaction a plain confluent-kafka producer
left open, on its coordinator and on the partition it wrote to, and nothing once it ended.
An oracle that cannot see an open transaction would let every "nothing left open" pass."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.fixtures.kafka import KafkaBroker
from tests.fixtures.kafka_tools import describe_producers, list_transactions, open_transactions


def test_oracle_sees_an_open_transaction_and_its_end(kafka_broker: KafkaBroker) -> None:
    bootstrap, topic, prefix = kafka_broker.bootstrap_servers, "oracle-out", "oracle"
    kafka_broker.create_topic(topic, 2)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-0", "log_level": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=1)
    assert producer.flush(30) == 0

    listed = {t.transactional_id: t for t in list_transactions(bootstrap)}
    assert listed[f"{prefix}-0"].state == "Ongoing" and listed[f"{prefix}-0"].open
    (active,) = describe_producers(bootstrap, topic, 1)
    assert active.transaction_start == 0
    assert describe_producers(bootstrap, topic, 0) == []
    found = open_transactions(bootstrap, prefix, {topic: 2})
    assert found == [
        f"{prefix}-0 (Ongoing)",
        f"{topic}-1: producer {active.producer_id} @ 0",
    ]
    assert open_transactions(bootstrap, "other", {}) == []

    producer.commit_transaction(30)
    listed = {t.transactional_id: t for t in list_transactions(bootstrap)}
    assert listed[f"{prefix}-0"].state == "CompleteCommit" and not listed[f"{prefix}-0"].open
    (active,) = describe_producers(bootstrap, topic, 1)
    assert active.transaction_start is None
    assert open_transactions(bootstrap, prefix, {topic: 2}) == []
