"""``KafkaSource`` on the source contract, without Spark: splits per partition, starting and
stopping offsets of every initializer, ranges read exactly, positions through a restore."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from sparkpoint.common import SimpleStringSchema
from sparkpoint.connectors.source import SplitEnumerator
from sparkpoint.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaTopicPartition,
)
from tests.fixtures.kafka import KafkaBroker, ordered_producer


def _produce(broker: KafkaBroker, topic: str, partition: int, values: list[str], ts: int) -> None:
    producer = ordered_producer(broker.bootstrap_servers)
    for v in values:
        producer.produce(topic, v.encode(), partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def _source(broker: KafkaBroker, topic: str, start: KafkaOffsetsInitializer) -> KafkaSource:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_topics(topic)
        .set_group_id(f"{topic}-group")
        .set_starting_offsets(start)
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )


def _drain(enum: SplitEnumerator, per_split: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    while True:
        ranges = enum.plan_epoch(per_split)
        if not ranges:
            return out
        for r in ranges:
            batches = list(enum.source.read_batches(r))
            assert all(len(b) <= per_split and len(t or ()) == len(b) for b, t in batches)
            out.setdefault(r.split_id, []).extend(v for b, _t in batches for v in b)
        enum.commit_epoch(ranges)


def test_splits_offsets_and_restore(kafka_broker: KafkaBroker) -> None:
    topic = "source-contract"
    kafka_broker.create_topic(topic, 2)
    _produce(kafka_broker, topic, 0, [f"a{i}" for i in range(10)], ts=1000)
    _produce(kafka_broker, topic, 0, [f"b{i}" for i in range(10)], ts=2000)
    _produce(kafka_broker, topic, 1, [f"c{i}" for i in range(5)], ts=1000)

    enum = SplitEnumerator(_source(kafka_broker, topic, KafkaOffsetsInitializer.earliest()), 2)
    assert sorted(enum.splits) == [f"{topic}-0", f"{topic}-1"]
    assert [enum.splits[f"{topic}-0"].position, enum.splits[f"{topic}-0"].end] == [0, 20]
    # Every record comes with the timestamp its producer set.
    stamps = {
        r.split_id: [t for _b, ts in enum.source.read_batches(r) for t in ts or ()]
        for r in enum.plan_epoch(100)
    }
    assert stamps == {f"{topic}-0": [1000] * 10 + [2000] * 10, f"{topic}-1": [1000] * 5}
    first = enum.plan_epoch(7)
    enum.commit_epoch(first)
    saved = enum.snapshot_state()
    rest = _drain(enum, 7)
    assert rest[f"{topic}-0"] == [f"a{i}" for i in range(7, 10)] + [f"b{i}" for i in range(10)]
    assert all(s.finished for s in enum.splits.values())

    restored = SplitEnumerator(_source(kafka_broker, topic, KafkaOffsetsInitializer.latest()), 2)
    restored.restore_state(saved)
    assert _drain(restored, 100) == rest

    def starts(initializer: KafkaOffsetsInitializer) -> dict[str, int]:
        e = SplitEnumerator(_source(kafka_broker, topic, initializer), 2)
        return {k: s.position for k, s in e.splits.items()}

    assert starts(KafkaOffsetsInitializer.latest()) == {f"{topic}-0": 20, f"{topic}-1": 5}
    assert starts(KafkaOffsetsInitializer.timestamp(1500)) == {f"{topic}-0": 10, f"{topic}-1": 5}
    given = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 3})
    assert starts(given) == {f"{topic}-0": 3, f"{topic}-1": 0}
    consumer = Consumer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": f"{topic}-group"}
    )
    consumer.commit(offsets=[TopicPartition(topic, 0, 12)], asynchronous=False)
    consumer.close()
    committed = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
    assert starts(committed) == {f"{topic}-0": 12, f"{topic}-1": 0}


def test_ranges_skip_transaction_markers(kafka_broker: KafkaBroker) -> None:
    """Committed and aborted transactions leave offsets without records: a range still ends."""
    topic = "source-markers"
    kafka_broker.create_topic(topic, 1)
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "transactional.id": "source-markers",
            "log_level": 0,
        }
    )
    producer.init_transactions(30)
    for word, commit in (("kept", True), ("dropped", False), ("kept-too", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{word}{i}".encode())
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_broker.bootstrap_servers)
        .set_topics(topic)
        .set_property("isolation.level", "read_committed")
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    enum = SplitEnumerator(source, 1)
    t0 = time.monotonic()
    got = _drain(enum, 4)
    assert time.monotonic() - t0 < 30
    assert got[f"{topic}-0"] == ["kept0", "kept1", "kept2", "kept-too0", "kept-too1", "kept-too2"]


def test_a_planning_asks_every_partition_at_once_as_one_by_one(kafka_broker: KafkaBroker) -> None:
    """``prepare_ranges`` looks up all partitions' offsets in one request per leader: the
    ranges are those each partition's own lookup gives, an open transaction's records left
    out (its last stable offset) and an empty partition planning nothing."""
    topic = "source-batched-offsets"
    kafka_broker.create_topic(topic, 3)
    _produce(kafka_broker, topic, 0, [f"a{i}" for i in range(6)], ts=1000)
    _produce(kafka_broker, topic, 1, [f"b{i}" for i in range(3)], ts=1000)
    open_txn = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "transactional.id": topic,
            "log_level": 0,
        }
    )
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(topic, b"open", partition=1)
    assert open_txn.flush(30) == 0
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_broker.bootstrap_servers)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    enum = SplitEnumerator(source, 2)
    planned = {r.split_id: (r.start, r.end, r.records) for r in enum.plan_epoch(100)}
    alone = {}
    for split in enum.splits.values():
        r = source.next_range(split, 100)  # no prepare_ranges: the partition asked alone
        if r is not None:
            alone[r.split_id] = (r.start, r.end, r.records)
    assert planned == alone == {f"{topic}-0": (0, 6, 6), f"{topic}-1": (0, 3, 3)}
    open_txn.abort_transaction(30)
