"""Partition discovery while an unbounded ``KafkaSource`` runs, as Flink's: partitions added
to a subscribed topic, and topics that come to match a subscribed pattern, are found every
``partition.discovery.interval.ms`` and read from their earliest offset whatever the
starting offsets; every record of them arrives exactly once.

The first test starts from a timestamp: records stamped before it are skipped in the
partitions the job starts with, and read in the partitions added later."""

from __future__ import annotations

import collections
import time
from typing import Any

from confluent_kafka.admin import AdminClient, NewPartitions

from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream.connectors.kafka import KafkaOffsetsInitializer
from tests.connectors.kafka.source_jobs import (
    cancel,
    produce,
    source_env,
    unbounded_source,
    wait_for,
)
from tests.fixtures.kafka import KafkaBroker

DISCOVERY_MS = "200"


OLD, START, NEW = 1_000_000, 2_000_000, 3_000_000  # record timestamps; the job starts at START


def _records(
    tag: str, partitions: range, per_partition: int, ts: int | None = None
) -> list[tuple[int, str, int | None]]:
    return [(p, f"{tag}-{p}-{i}", ts) for p in partitions for i in range(per_partition)]


def settle() -> None:
    """Let any wrongly planned re-read happen: a paced job with nothing to read runs no
    epoch, and one with records available (a wrong position) runs one at once."""
    time.sleep(1.0)


def _collected(sink: CollectSink) -> collections.Counter[str]:
    return collections.Counter(sink.collected)


def test_added_partitions_are_read_from_their_start(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    topic = "discovery-partitions"
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic, 2)
    produce(bootstrap, topic, _records("before", range(2), 50, OLD))  # before the start
    env = source_env(spark, tmp_path, per_split=100)
    source = (
        unbounded_source(bootstrap)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.timestamp(START))
        .set_property("partition.discovery.interval.ms", DISCOVERY_MS)
        .build()
    )
    sink = CollectSink()
    env.from_source(source, None, "kafka").uid("kafka").sink_to(sink)
    client = env.execute_async("discovery-partitions")
    try:
        live = _records("live", range(2), 150, NEW)
        produce(bootstrap, topic, live)
        wait_for(client, lambda: len(sink.collected) >= len(live), "the live records")
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=30)
        # Stamped before the starting timestamp, and written before the job can have found
        # the new partitions: read from their start all the same.
        added = _records("added", range(2, 4), 120, OLD) + _records("more", range(4), 30, NEW)
        produce(bootstrap, topic, added)
        expected = collections.Counter(v for _p, v, _t in live + added)
        wait_for(client, lambda: len(sink.collected) >= sum(expected.values()), "every record")
        settle()
    finally:
        cancel(client)
    assert _collected(sink) == expected
    splits = client.job_master.split_enumerators()["kafka"].splits
    assert sorted(splits) == [f"{topic}-{p}" for p in range(4)]
    assert {k: s.position for k, s in splits.items()} == {
        f"{topic}-0": 50 + 150 + 30,
        f"{topic}-1": 50 + 150 + 30,
        f"{topic}-2": 120 + 30,
        f"{topic}-3": 120 + 30,
    }


def test_a_new_topic_matching_the_pattern_is_read(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic("discovery-pattern-a", 2)
    kafka_broker.create_topic("discovery-other", 1)
    first = _records("a", range(2), 40)
    produce(bootstrap, "discovery-pattern-a", first)
    produce(bootstrap, "discovery-other", _records("other", range(1), 10))  # never matches
    env = source_env(spark, tmp_path, per_split=100)
    source = (
        unbounded_source(bootstrap)
        .set_topic_pattern("discovery-pattern-.*")
        .set_property("partition.discovery.interval.ms", DISCOVERY_MS)
        .build()
    )
    sink = CollectSink()
    env.from_source(source, None, "kafka").uid("kafka").sink_to(sink)
    client = env.execute_async("discovery-pattern")
    try:
        wait_for(client, lambda: len(sink.collected) >= len(first), "the first topic's records")
        kafka_broker.create_topic("discovery-pattern-b", 3)
        second = _records("b", range(3), 70)
        produce(bootstrap, "discovery-pattern-b", second)
        expected = collections.Counter(v for _p, v, _t in first + second)
        wait_for(client, lambda: len(sink.collected) >= sum(expected.values()), "every record")
        settle()
    finally:
        cancel(client)
    assert _collected(sink) == expected
    splits = client.job_master.split_enumerators()["kafka"].splits
    assert sorted(splits) == ["discovery-pattern-a-0", "discovery-pattern-a-1"] + [
        f"discovery-pattern-b-{p}" for p in range(3)
    ]
