"""The broker fixture itself: it answers, keeps records across a crash and restart."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.kafka import KafkaBroker, ordered_producer


def _read_all(broker: KafkaBroker, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "t", "log_level": 0}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(1000, 0.5) if m.error() is None]
    consumer.close()
    return got


def test_records_survive_a_broker_crash(kafka_broker: KafkaBroker) -> None:
    kafka_broker.create_topic("broker-crash", 1)
    producer = ordered_producer(kafka_broker.bootstrap_servers)
    for i in range(100):
        producer.produce("broker-crash", str(i).encode())
    assert producer.flush(30) == 0
    kafka_broker.restart()
    assert kafka_broker.start_seconds < 90
    got = _read_all(kafka_broker, "broker-crash", 100)
    assert got == [str(i).encode() for i in range(100)]
