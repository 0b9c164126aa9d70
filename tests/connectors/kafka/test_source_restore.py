"""Restored Kafka splits are input from outside (issue 29 item 1): a savepoint whose master
state names a topic the source is not subscribed to, or an impossible offset, is refused
with an error naming the ``_metadata``, the field and the value, before any epoch runs and
before the source asks Kafka anything about the split."""

from __future__ import annotations

import collections
import copy
import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from sparkpoint.checkpoint.metadata.file_format import (
    load_checkpoint_metadata,
    store_checkpoint_metadata,
)
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream.connectors.kafka import KafkaTopicPartition
from sparkpoint.errors import RestoreError
from sparkpoint.runtime.driver.master_state import JobMasterState
from tests.connectors.kafka.source_jobs import (
    produce,
    run_epochs,
    source_env,
    unbounded_source,
)
from tests.fixtures.kafka import KafkaBroker

TOPIC = "restore-splits"
FIELD = "master state sources['kafka']"


def _job(env: Any, bootstrap: str) -> CollectSink:
    sink = CollectSink()
    source = unbounded_source(bootstrap).set_topics(TOPIC).build()
    env.from_source(source, None, "kafka").uid("kafka").sink_to(sink)
    return sink


def _set(index: int, path: tuple[str, ...], value: Any) -> Callable[[list[Any]], None]:
    def change(splits: list[Any]) -> None:
        target = splits[index]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _foreign_topic(splits: list[Any]) -> None:
    splits[0]["info"]["topic"] = "secret-topic"
    splits[0]["split_id"] = "secret-topic-0"


CRAFTED = [
    (_foreign_topic, "[0].info.topic", "'secret-topic'", "is not among the source's topics"),
    (_set(1, ("position",), -5), "[1].position", "-5", "is negative"),
    (_set(0, ("position",), "7"), "[0].position", "'7'", "is not an integer"),
    (_set(1, ("end",), 2.5), "[1].end", "2.5", "is not an integer"),
    (_set(0, ("info", "partition"), -1), "[0].info.partition", "-1", "is negative"),
    (_set(1, ("split_id",), "restore-splits-0"), "[1].split_id", "'restore-splits-0'", "is not"),
]


def test_crafted_splits_are_refused_before_any_epoch(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(TOPIC, 2)
    produce(bootstrap, TOPIC, [(i % 2, str(i), None) for i in range(40)])
    env = source_env(spark, tmp_path, per_split=2)
    _job(env, bootstrap)
    client = env.execute_async("restore-splits")
    run_epochs(client, 1)
    savepoint = str(client.stop_with_savepoint(False).result(timeout=120))
    client.wait(timeout=120)
    directory = savepoint.removeprefix("file://")
    metadata_path = os.path.join(directory, "_metadata")
    with open(metadata_path, "rb") as f:
        original = f.read()
    metadata = load_checkpoint_metadata(original, directory)
    master = JobMasterState.from_metadata(metadata)
    assert master is not None
    # The savepoint as taken restores (its splits pass the checks) and reads the rest.
    env = source_env(spark, tmp_path, per_split=100, restore=savepoint)
    sink = _job(env, bootstrap)
    restored = env.execute_async("restore-splits-good")
    run_epochs(restored, 2)
    restored.cancel().result(timeout=60)
    restored.wait(timeout=60)
    # Record str(i) is at offset i // 2 of partition i % 2; the restore reads every record
    # at or after its partition's restored position once (the collect sink also gets the
    # savepoint's last epoch again, from its pending commits).
    position = {s["info"]["partition"]: s["position"] for s in master.sources["kafka"]}
    rest = {str(i) for i in range(40) if i // 2 >= position[i % 2]}
    assert 0 < len(rest) < 40
    assert collections.Counter(v for v in sink.collected if v in rest) == dict.fromkeys(rest, 1)

    for change, field, value, why in CRAFTED:
        sources = copy.deepcopy(dict(master.sources))
        change(sources["kafka"])
        crafted = dataclasses.replace(master, sources=sources)
        bad = dataclasses.replace(metadata, master_states=(crafted.to_master_state(),))
        with open(metadata_path, "wb") as f:
            store_checkpoint_metadata(bad, f)
        try:
            env = source_env(spark, tmp_path, per_split=100, restore=savepoint)
            _job(env, bootstrap)
            client = env.execute_async("restore-splits-crafted")
            with pytest.raises(RestoreError) as refused:
                client.wait(timeout=120)
        finally:
            with open(metadata_path, "wb") as f:
                f.write(original)
        message = str(refused.value)
        prefix = f"checkpoint metadata file {metadata_path}: {FIELD}{field} = {value} {why}"
        assert message.startswith(prefix), message
        assert client.job_master.progress.epochs_run == 0
        assert client.job_master.status == "FAILED"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    assert "secret-topic" not in admin.list_topics(timeout=30).topics


def test_split_checks_need_no_broker() -> None:
    """The checks read only the snapshot and the source's configuration: nothing listens at
    this source's bootstrap address."""
    nowhere = "127.0.0.1:9"
    good = {"split_id": "t-0", "position": 3, "end": None, "info": {"topic": "t", "partition": 0}}
    sources = {
        "topics": unbounded_source(nowhere).set_topics("t").build(),
        "pattern": unbounded_source(nowhere).set_topic_pattern("t|u").build(),
        "partitions": unbounded_source(nowhere)
        .set_partitions({KafkaTopicPartition("t", 0)})
        .build(),
    }
    for source in sources.values():
        source.check_restored_splits([good], "/sp/_metadata", FIELD)
    other = copy.deepcopy(good)
    other["info"]["topic"], other["split_id"] = "tt", "tt-0"
    refusals = {
        "topics": "is not among the source's topics ['t']",
        "pattern": "does not match the source's topic pattern 't|u'",
        "partitions": "(with its partition) is not among the source's partitions ['t-0']",
    }
    for kind, source in sources.items():
        with pytest.raises(RestoreError) as refused:
            source.check_restored_splits([good, other], "/sp/_metadata", FIELD)
        expected = f"/sp/_metadata: {FIELD}[1].info.topic = 'tt' {refusals[kind]}"
        assert str(refused.value).startswith(expected)
    with pytest.raises(RestoreError, match=r"sources\['kafka'\] = \{\} is not a list of splits"):
        sources["topics"].check_restored_splits({}, "/sp/_metadata", FIELD)
    with pytest.raises(RestoreError, match=r"\[0\]\.position = True is not an integer"):
        sources["topics"].check_restored_splits(
            [{**good, "position": True}], "/sp/_metadata", FIELD
        )
