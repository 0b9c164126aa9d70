"""Records deleted before the job read them (issue 38 item 3): retention (here Kafka's
DeleteRecords, which moves the log start the same way) is never a silent loss. A position
below a partition's log start fails the job with the partition, the position and the log
start; with ``sparkpoint.skip-deleted-records`` the job continues from the log start and
counts the offsets it skipped, never as read. One partition holds records 0-999, the job's
savepoint is at position 300, the records below 850 are deleted, the job is restored."""

from __future__ import annotations

import collections
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_metadata
from sparkpoint.common import RestartStrategies
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.connectors.source import SourceSplit, SplitRange
from sparkpoint.datastream.connectors.kafka import KafkaOffsetsInitializer
from sparkpoint.errors import JobExecutionError, RecordsDeletedError
from sparkpoint.runtime.driver.master_state import JobMasterState
from tests.connectors.kafka.source_jobs import (
    produce,
    source_env,
    unbounded_source,
    wait_for,
)
from tests.fixtures.kafka import KafkaBroker

N, SAVED, LOG_START = 1000, 300, 850


def _delete_below(bootstrap: str, topic: str, offset: int) -> None:
    """Kafka's DeleteRecords: partition 0 of ``topic`` starts at ``offset`` afterwards."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.delete_records([TopicPartition(topic, 0, offset)], operation_timeout=30)
    for future in futures.values():
        assert future.result(timeout=60).low_watermark == offset


def _message(topic: str, what: str) -> str:
    return (
        f"Kafka partition {topic}-0: the {what} position {SAVED} is below the partition's log "
        f"start {LOG_START}; the records at offsets [{SAVED}, {LOG_START}) were deleted "
        "(retention or DeleteRecords) before the job read them."
    )


def _source(bootstrap: str, topic: str, skip: bool | None = None, starting: Any = None) -> Any:
    builder = unbounded_source(bootstrap).set_topics(topic)
    if starting is not None:
        builder.set_starting_offsets(starting).set_group_id(f"{topic}-group")
    if skip is not None:
        builder.set_skip_deleted_records(skip)
    return builder.build()


def _savepoint_at_300(spark: Any, tmp_path: Any, bootstrap: str, topic: str) -> str:
    """A savepoint of a job that read records 0-299 (all there were), then records 300-999
    written."""
    produce(bootstrap, topic, [(0, str(i), None) for i in range(SAVED)])
    env = source_env(spark, tmp_path, per_split=100, parallelism=1)
    env.from_source(_source(bootstrap, topic), None, "kafka").uid("kafka").sink_to(CollectSink())
    client = env.execute_async("retention-first")
    progress = client.job_master.progress
    wait_for(client, lambda: progress.records_in >= SAVED, "300 records read")
    savepoint = str(client.stop_with_savepoint(False).result(timeout=120))
    client.wait(timeout=120)
    directory = savepoint.removeprefix("file://")
    with open(f"{directory}/_metadata", "rb") as f:
        master = JobMasterState.from_metadata(load_checkpoint_metadata(f.read(), directory))
    assert master is not None
    assert [s["position"] for s in master.sources["kafka"]] == [SAVED]
    produce(bootstrap, topic, [(0, str(i), None) for i in range(SAVED, N)])
    return savepoint


def _restored(
    spark: Any, tmp_path: Any, bootstrap: str, topic: str, savepoint: str, skip: bool | None
) -> tuple[Any, CollectSink]:
    env = source_env(spark, tmp_path, per_split=100, parallelism=1, restore=savepoint)
    # Restarts allowed: a position below the log start fails the job all the same.
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    sink = CollectSink()
    env.from_source(_source(bootstrap, topic, skip), None, "kafka").uid("kafka").sink_to(sink)
    return env.execute_async(f"retention-skip-{skip}"), sink


def _source_metrics(client: Any) -> dict[str, Any]:
    """The source operator's metrics by their dotted name (subtask 0's)."""
    return {
        ".".join((*(p for g in v.key.groups for p in g if p is not None), v.key.name)): v.value
        for v in client.get_metric_values()
        if v.operator_name == "kafka" and v.subtask == 0
    }


def test_restore_below_the_log_start_fails_or_skips_counted(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    bootstrap, topic = kafka_broker.bootstrap_servers, "retention-restore"
    kafka_broker.create_topic(topic, 1)
    savepoint = _savepoint_at_300(spark, tmp_path, bootstrap, topic)
    _delete_below(bootstrap, topic, LOG_START)

    # Default: the job fails at once (no restart brings the records back), naming them.
    client, sink = _restored(spark, tmp_path, bootstrap, topic, savepoint, None)
    with pytest.raises(JobExecutionError) as failed:
        client.wait(timeout=120)
    assert _message(topic, "restored or planned") in str(failed.value)
    assert isinstance(failed.value.__cause__, RecordsDeletedError)
    assert client.job_master.progress.epochs_run == 0
    assert client.job_master.progress.restarts == 0
    assert sink.collected == []

    # Opted in: records 850-999 exactly, 550 offsets skipped, none of them counted as read.
    client, sink = _restored(spark, tmp_path, bootstrap, topic, savepoint, True)
    progress = client.job_master.progress
    wait_for(client, lambda: len(sink.collected) >= N - LOG_START, "150 records")
    client.cancel().result(timeout=60)
    client.wait(timeout=60)
    assert collections.Counter(sink.collected) == {str(i): 1 for i in range(LOG_START, N)}
    assert progress.records_in == N - LOG_START
    metrics = _source_metrics(client)
    assert metrics["sparkpoint.numRecordsSkipped"] == LOG_START - SAVED
    assert metrics[f"split.{topic}-0.numRecordsSkipped"] == LOG_START - SAVED
    assert metrics["numRecordsOut"] == N - LOG_START


def _split(topic: str, position: int) -> SourceSplit:
    return SourceSplit(f"{topic}-0", position, None, {"topic": topic, "partition": 0})


def test_planning_below_the_log_start(kafka_broker: KafkaBroker) -> None:
    """The driver's planning alone: fail, or a range from the log start and the skipped
    offsets counted once the epoch is accepted (a replanned, failed epoch counts nothing)."""
    bootstrap, topic = kafka_broker.bootstrap_servers, "retention-plan"
    kafka_broker.create_topic(topic, 1)
    produce(bootstrap, topic, [(0, str(i), None) for i in range(N)])
    _delete_below(bootstrap, topic, LOG_START)

    failing = _source(bootstrap, topic)
    with pytest.raises(RecordsDeletedError) as refused:
        failing.next_range(_split(topic, SAVED), 100)
    assert str(refused.value).startswith(_message(topic, "restored or planned"))
    assert "sparkpoint.skip-deleted-records=true" in str(refused.value)

    skipping = _source(bootstrap, topic, skip=True)
    split = _split(topic, SAVED)
    planned = skipping.next_range(split, 100)
    assert planned == SplitRange(split.split_id, LOG_START, LOG_START + 100, split.info, False, 100)
    assert skipping.split_skipped(split) == 0  # planned, not accepted: nothing counted yet
    assert skipping.next_range(split, 100) == planned  # a failed epoch plans the same again
    skipping.advance(split, planned)
    assert (split.position, skipping.split_skipped(split)) == (LOG_START + 100, LOG_START - SAVED)
    following = skipping.next_range(split, 1000)
    assert following is not None and (following.start, following.end) == (LOG_START + 100, N)
    skipping.advance(split, following)
    assert skipping.split_skipped(split) == LOG_START - SAVED
    # A position at or above the log start is never touched.
    assert failing.next_range(_split(topic, LOG_START), 10) is not None

    # A bounded split whose stopping offset is below the log start ends, all of it skipped.
    bounded = _split(topic, SAVED)
    bounded.end = 500
    other = _source(bootstrap, topic, skip=True)
    last = other.next_range(bounded, 100)
    assert last == SplitRange(bounded.split_id, 500, 500, bounded.info, True, 0)
    other.advance(bounded, last)
    assert bounded.finished and other.split_skipped(bounded) == 200


@pytest.mark.parametrize(
    "starting, reset",
    [
        (KafkaOffsetsInitializer.earliest(), "earliest"),
        (KafkaOffsetsInitializer.latest(), "latest"),
        (KafkaOffsetsInitializer.committed_offsets(), "error"),
    ],
)
def test_a_range_deleted_after_it_was_planned_fails_its_task(
    kafka_broker: KafkaBroker, starting: KafkaOffsetsInitializer, reset: str
) -> None:
    """The reading consumer's ``auto.offset.reset`` follows the starting offsets, as Flink's
    (earliest → earliest, latest → latest, committed without a strategy → an error). Records
    deleted between the driver's plan and the task's read make the consumer reset whatever
    the policy; the task notices and fails the range (opted in: a failure the job restarts
    from, so that the driver skips them counted)."""
    bootstrap, topic = kafka_broker.bootstrap_servers, f"retention-race-{reset}"
    kafka_broker.create_topic(topic, 1)
    produce(bootstrap, topic, [(0, str(i), None) for i in range(N)])
    source = _source(bootstrap, topic, starting=starting)
    planned = source.next_range(_split(topic, SAVED), 100)
    assert planned is not None and (planned.start, planned.end) == (SAVED, SAVED + 100)
    _delete_below(bootstrap, topic, LOG_START)
    with pytest.raises(RecordsDeletedError) as failed:
        list(source.read_batches(planned))
    assert str(failed.value).startswith(_message(topic, "planned"))

    skipping = _source(bootstrap, topic, skip=True, starting=starting)
    with pytest.raises(RuntimeError, match="The job restarts to skip them, counted") as failed:
        list(skipping.read_batches(planned))
    assert not isinstance(failed.value, RecordsDeletedError)
    # A range at or above the log start reads its records.
    later = SplitRange(planned.split_id, LOG_START, LOG_START + 10, planned.info, False, 10)
    got = [v for values, _ts in source.read_batches(later) for v in values]
    assert got == [str(i) for i in range(LOG_START, LOG_START + 10)]


def test_reset_strategy_of_each_starting_offsets() -> None:
    """Flink's ``OffsetsInitializer.getAutoOffsetResetStrategy`` for each initializer."""
    from sparkpoint.datastream.connectors.kafka import KafkaOffsetResetStrategy as R
    from sparkpoint.datastream.connectors.kafka import KafkaTopicPartition

    given = {KafkaTopicPartition("t", 0): 5}
    cases = [
        (KafkaOffsetsInitializer.earliest(), R.EARLIEST),
        (KafkaOffsetsInitializer.latest(), R.LATEST),
        (KafkaOffsetsInitializer.timestamp(1), R.LATEST),
        (KafkaOffsetsInitializer.committed_offsets(), R.NONE),
        (KafkaOffsetsInitializer.committed_offsets(R.EARLIEST), R.EARLIEST),
        (KafkaOffsetsInitializer.offsets(given), R.EARLIEST),
        (KafkaOffsetsInitializer.offsets(given, R.LATEST), R.LATEST),
    ]
    assert [i.get_auto_offset_reset_strategy() for i, _ in cases] == [r for _, r in cases]


def test_records_deleted_is_found_in_a_task_failure() -> None:
    """A task's ``RecordsDeletedError`` reaches the driver as text in Spark's error: found
    there (the job fails at once), as is the driver's own; other failures are not."""
    from sparkpoint.runtime.driver.failures import records_deleted

    message = _message("t", "planned")
    spark_error = RuntimeError(
        "An error occurred while calling o12.collect.\n: org.apache.spark.SparkException: "
        "Job aborted ...\nTraceback (most recent call last):\n  File ...\n"
        f"sparkpoint.errors.RecordsDeletedError: {message}\n\tat org.apache..."
    )
    assert records_deleted(spark_error) == message
    assert records_deleted(RecordsDeletedError(message)) == message
    wrapped = RuntimeError("epoch failed")
    wrapped.__cause__ = RecordsDeletedError(message)
    assert records_deleted(wrapped) == message
    assert records_deleted(RuntimeError(f"{message} The job restarts to skip them")) is None
