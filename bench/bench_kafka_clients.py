"""Which Python Kafka client the connector uses: produce and consume throughput of 100-byte
records against a real broker, and whether transactions and ``read_committed`` work.

Starts its own broker (``tests.fixtures.kafka``); prints one JSON line per measurement.
Run: ``python bench/bench_kafka_clients.py [--records 200000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fixtures.kafka import KafkaBroker

PAYLOAD = b"x" * 100


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def confluent_produce(bootstrap: str, topic: str, n: int) -> None:
    """``produce()`` per record (librdkafka batches), one ``flush`` at the end."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    for i in range(n):
        while True:
            try:
                p.produce(topic, PAYLOAD, partition=i % 4)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(60)


def confluent_consume(bootstrap: str, topic: str, n: int) -> int:
    """``consume(num_messages=10000)`` batches from the four partitions."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "log_level": 0})
    c.assign([TopicPartition(topic, p, 0) for p in range(4)])
    got = 0
    while got < n:
        got += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    c.close()
    return got


def kafka_python_produce(bootstrap: str, topic: str, n: int) -> None:
    """``send()`` per record, ``flush`` at the end."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(n):
        p.send(topic, PAYLOAD, partition=i % 4)
    p.flush(60)
    p.close()


def kafka_python_consume(bootstrap: str, topic: str, n: int) -> int:
    """``poll(max_records=10000)`` batches from the four partitions."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    parts = [TopicPartition(topic, p) for p in range(4)]
    c.assign(parts)
    c.seek_to_beginning(*parts)
    got = 0
    while got < n:
        got += sum(len(v) for v in c.poll(timeout_ms=1000, max_records=10000).values())
    c.close()
    return got


def confluent_transactions(bootstrap: str, topic: str) -> dict[str, Any]:
    """One committed and one aborted transaction; what a ``read_committed`` consumer sees."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench", "log_level": 0})
    t0 = time.perf_counter()
    p.init_transactions(30)
    init_s = time.perf_counter() - t0
    p.begin_transaction()
    for i in range(100):
        p.produce(topic, b"committed-%d" % i, partition=0)
    t0 = time.perf_counter()
    p.commit_transaction(30)
    commit_s = time.perf_counter() - t0
    p.begin_transaction()
    for i in range(100):
        p.produce(topic, b"aborted-%d" % i, partition=0)
    p.abort_transaction(30)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-rc",
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen += [m.value() for m in c.consume(1000, 0.5) if m.error() is None]
    c.close()
    return {
        "init_transactions_s": round(init_s, 4),
        "commit_transaction_s": round(commit_s, 4),
        "read_committed_ok": sorted(seen) == sorted(b"committed-%d" % i for i in range(100)),
    }


def kafka_python_transactions(bootstrap: str, topic: str) -> dict[str, Any]:
    """As ``confluent_transactions`` with kafka-python's transactional producer."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="bench-kp")
    t0 = time.perf_counter()
    p.init_transactions()
    init_s = time.perf_counter() - t0
    p.begin_transaction()
    for i in range(100):
        p.send(topic, b"committed-%d" % i, partition=0)
    t0 = time.perf_counter()
    p.commit_transaction()
    commit_s = time.perf_counter() - t0
    p.begin_transaction()
    for i in range(100):
        p.send(topic, b"aborted-%d" % i, partition=0)
    p.abort_transaction()
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    seen: list[bytes] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen += [r.value for v in c.poll(timeout_ms=500).values() for r in v]
    c.close()
    return {
        "init_transactions_s": round(init_s, 4),
        "commit_transaction_s": round(commit_s, 4),
        "read_committed_ok": sorted(seen) == sorted(b"committed-%d" % i for i in range(100)),
    }


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    """Start a broker, measure both clients, stop the broker."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    broker = KafkaBroker()
    try:
        broker.start()
        _emit(what="broker_start", seconds=round(broker.start_seconds, 2))
        clients = {
            "confluent-kafka": (confluent_produce, confluent_consume, confluent_transactions),
            "kafka-python": (kafka_python_produce, kafka_python_consume, kafka_python_transactions),
        }
        for name, (produce, consume, transactions) in clients.items():
            n = args.records
            topic = f"bench-{name}"
            broker.create_topic(topic, 4)
            for op, fn in (("produce", produce), ("consume", consume)):
                wall, cpu = _timed(fn, broker.bootstrap_servers, topic, n)
                _emit(
                    client=name,
                    op=op,
                    records=n,
                    record_bytes=len(PAYLOAD),
                    seconds=round(wall, 3),
                    records_per_s=round(n / wall),
                    cpu_s=round(cpu, 3),
                )
            broker.create_topic(f"{topic}-txn", 1)
            _emit(
                client=name,
                op="transactions",
                **transactions(broker.bootstrap_servers, topic + "-txn"),
            )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
