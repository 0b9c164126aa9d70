"""Consumer-group offsets committed to Kafka when a checkpoint completes, as Flink's
``KafkaSource`` (``commit.offsets.on.checkpoint``, on by default with a group id): for
monitoring only. The group's offsets read through the admin API after the job are the
offsets of its last checkpoint (here the stop's savepoint)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_metadata
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.driver.master_state import JobMasterState
from tests.connectors.kafka.source_jobs import produce, source_env, unbounded_source, wait_for
from tests.fixtures.kafka import KafkaBroker

RECORDS = {0: 120, 1: 45, 2: 0}  # partition -> records


def _group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    asked = [TopicPartition(topic, p) for p in RECORDS]
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, asked)])
    found = futures[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in found.topic_partitions}


def _savepoint_offsets(path: str) -> dict[str, int]:
    directory = path.removeprefix("file://")
    with open(os.path.join(directory, "_metadata"), "rb") as f:
        metadata = load_checkpoint_metadata(f.read(), directory)
    master = JobMasterState.from_metadata(metadata)
    assert master is not None
    return {split["split_id"]: split["position"] for split in master.sources["kafka"]}


def test_completed_checkpoints_commit_the_group_offsets(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    topic, group = "offsets-commit", "offsets-commit-group"
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic, len(RECORDS))
    produce(bootstrap, topic, [(p, f"{p}-{i}", None) for p, n in RECORDS.items() for i in range(n)])
    env = source_env(spark, tmp_path, per_split=50)
    source = unbounded_source(bootstrap).set_topics(topic).set_group_id(group).build()
    sink = CollectSink()
    env.from_source(source, None, "kafka").uid("kafka").sink_to(sink)
    client = env.execute_async("offsets-commit")
    progress = client.job_master.progress
    # While the job runs, the group follows its checkpoints.
    wait_for(client, lambda: progress.records_in >= 50, "the first epoch")
    wait_for(
        client,
        lambda: _group_offsets(bootstrap, group, topic)[0] >= 50,
        "a committed offset of partition 0",
    )
    total = sum(RECORDS.values())
    wait_for(client, lambda: progress.records_in >= total, "every record read")
    savepoint = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    assert len(sink.collected) == total
    checkpointed = _savepoint_offsets(str(savepoint))
    assert checkpointed == {f"{topic}-{p}": n for p, n in RECORDS.items()}
    committed = _group_offsets(bootstrap, group, topic)
    assert {f"{topic}-{p}": offset for p, offset in committed.items()} == checkpointed


def test_no_commit_when_disabled_and_a_group_id_when_enabled(kafka_broker: KafkaBroker) -> None:
    topic, group = "offsets-no-commit", "offsets-no-commit-group"
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic, len(RECORDS))
    source = (
        unbounded_source(bootstrap)
        .set_topics(topic)
        .set_group_id(group)
        .set_property("commit.offsets.on.checkpoint", "false")
        .build()
    )
    splits = [
        {"split_id": f"{topic}-{p}", "position": 0, "info": {"topic": topic, "partition": p}}
        for p in RECORDS
    ]
    source.notify_checkpoint_complete(1, splits)
    assert set(_group_offsets(bootstrap, group, topic).values()) == {-1001}  # none committed
    with pytest.raises(ConfigurationError, match=r"group\.id is required"):
        (
            unbounded_source(bootstrap)
            .set_topics(topic)
            .set_property("commit.offsets.on.checkpoint", "true")
            .build()
        )
    with pytest.raises(ConfigurationError, match=r"commit\.offsets\.on\.checkpoint must be true"):
        (
            unbounded_source(bootstrap)
            .set_topics(topic)
            .set_group_id(group)
            .set_property("commit.offsets.on.checkpoint", "yes")
            .build()
        )
