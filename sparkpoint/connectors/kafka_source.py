"""``KafkaSource``: one split per topic partition, its position the next offset to read.

The driver resolves starting (and, bounded, stopping) offsets and plans each epoch's range
``[position, min(end of partition, stopping offset))`` per split; a task reads exactly that
range with a confluent-kafka consumer, ``consume()`` a batch at a time, each record with its
Kafka timestamp (as Flink's ``KafkaSource``). Positions go into every checkpoint, so a restore
(or a savepoint) continues from the offsets it recorded; restored splits are checked against
the subscription first. Partitions (and topics matching a pattern) that appear while an
unbounded source runs are found every ``partition.discovery.interval.ms`` and read from their
earliest offset. With a group id, a completed checkpoint's offsets are committed to the
consumer group (``commit.offsets.on.checkpoint``), for monitoring only: restores never read
them. A position below a partition's log start (records deleted by retention before the job
read them) fails the job, or with ``sparkpoint.skip-deleted-records`` continues from the log
start, counting the offsets skipped.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sparkpoint.connectors.kafka_access import librdkafka_denied
from sparkpoint.connectors.kafka_client_config import (
    check_librdkafka,
    check_properties,
    client_config,
    redacted,
)
from sparkpoint.connectors.kafka_offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)
from sparkpoint.connectors.kafka_readers import ClientLog, ReaderPool
from sparkpoint.connectors.serialization_schemas import DeserializationSchema
from sparkpoint.connectors.source import (
    Boundedness,
    Source,
    SourceSplit,
    SplitRange,
    TimestampedBatch,
)
from sparkpoint.errors import ConfigurationError, RecordsDeletedError, RestoreError

__all__ = ["KafkaSource", "KafkaSourceBuilder"]

_LOG = logging.getLogger("sparkpoint.kafka")
_BATCH = 10_000  # records per consume() call
_STALL_SECONDS = 120.0  # a range that makes no progress for this long fails the task
_WATERMARK_RETRY_SECONDS = 30.0  # retriable errors of a watermark query, asked again this long
# A planning's lookup of every partition's offsets at once; past it (a broker down) each
# partition is asked alone, with the retries above, as without the lookup.
_BATCHED_OFFSETS_TIMEOUT_S = 5.0
# The reading consumers of this Python worker, by configuration, idle between ranges and
# closed when idle for long (kafka_readers.py).
READERS = ReaderPool()
_READER_FETCH_WAIT_MS = 10
# Whether a position below a partition's log start continues from the log start (counted)
# instead of failing the job: sparkpoint's own property, never passed to librdkafka.
SKIP_DELETED_RECORDS = "sparkpoint.skip-deleted-records"
# librdkafka's auto.offset.reset for each of Kafka's reset strategies (NONE: an error event).
_RESET = {
    KafkaOffsetResetStrategy.EARLIEST: "earliest",
    KafkaOffsetResetStrategy.LATEST: "latest",
    KafkaOffsetResetStrategy.NONE: "error",
}


class KafkaSource(Source):
    """Reads Kafka topics; build one with ``KafkaSource.builder()``."""

    concurrent_reads = True  # each range takes its own pooled consumer

    def __init__(
        self,
        properties: dict[str, str],
        topics: list[str] | None,
        topic_pattern: str | None,
        partitions: set[KafkaTopicPartition] | None,
        starting: KafkaOffsetsInitializer,
        stopping: KafkaOffsetsInitializer | None,
        bounded: bool,
        deserializer: DeserializationSchema,
        client_id_prefix: str | None,
    ) -> None:
        self.properties = dict(properties)
        self.topics = topics
        self.topic_pattern = topic_pattern
        self.partitions = partitions
        self.starting = starting
        self.stopping = stopping
        self.bounded = bounded
        self.deserializer = deserializer
        self.client_id_prefix = client_id_prefix
        interval_ms = float(self.properties.get("partition.discovery.interval.ms", "30000"))
        # Bounded sources and a non-positive interval do not discover, as Flink.
        self.discovery_interval_s = -1.0 if bounded or interval_ms <= 0 else interval_ms / 1000
        self.commit_offsets_on_checkpoint = "group.id" in self.properties and _flag(
            self.properties, "commit.offsets.on.checkpoint", True
        )
        self.skip_deleted_records = _flag(self.properties, SKIP_DELETED_RECORDS, False)
        self._consumer: Any = None  # the driver's metadata consumer; never pickled
        self._discovered_at = 0.0
        self._ends: dict[str, int] = {}  # split id -> end offset next_range last saw (driver)
        # split id -> (log start, end) looked up by prepare_ranges for this planning (driver)
        self._planned: dict[str, tuple[int, int]] = {}
        # split id -> offsets skipped below the log start in accepted epochs (driver)
        self._skipped: dict[str, int] = {}

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        """A builder for a ``KafkaSource``."""
        return KafkaSourceBuilder()

    def __repr__(self) -> str:
        return f"KafkaSource({redacted(self.properties)!r}, topics={self.topics!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_consumer"] = None
        state["_ends"] = {}
        state["_planned"] = {}
        state["_skipped"] = {}
        return state

    def get_boundedness(self) -> str:
        return Boundedness.BOUNDED if self.bounded else Boundedness.CONTINUOUS_UNBOUNDED

    def finishes_when_splits_end(self) -> bool:
        """Bounded, or unbounded with stopping offsets: the job ends when every partition
        reached its stopping offset, as Flink's ``KafkaSource``."""
        return self.bounded or self.stopping is not None

    def split_lag(self, split: SourceSplit) -> int | None:
        """The partition's end offset (or stopping offset, if lower) when ``next_range``
        last asked, minus the split's position: Flink's ``records-lag`` of the partition."""
        end = self._ends.get(split.split_id)
        return None if end is None else max(0, end - split.position)

    def split_skipped(self, split: SourceSplit) -> int | None:
        """Offsets of ``split`` skipped because they were deleted before the job read them
        (only with ``sparkpoint.skip-deleted-records``), in the epochs accepted so far."""
        return self._skipped.get(split.split_id, 0)

    # -- the driver's side --------------------------------------------------------------
    def _client_config(self, purpose: str) -> dict[str, Any]:
        translated = client_config(self.properties).librdkafka  # Java's names translated
        conf: dict[str, Any] = {k: v for k, v in translated.items() if "." in k}
        conf.pop("partition.discovery.interval.ms", None)
        conf.pop("commit.offsets.on.checkpoint", None)
        conf.pop("client.id.prefix", None)
        conf.pop(SKIP_DELETED_RECORDS, None)
        conf.setdefault("group.id", f"sparkpoint-{uuid.uuid4().hex[:8]}")
        prefix = self.client_id_prefix or self.properties.get("group.id", "sparkpoint-kafka")
        conf["client.id"] = f"{prefix}-{purpose}"
        conf["enable.auto.commit"] = False
        conf["enable.partition.eof"] = False
        return conf

    def _metadata_consumer(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = self._client_config("enumerator")
            # The driver's consumer outlives the job; its calls raise their own errors.
            conf.setdefault("log_level", 0)
            self._consumer = Consumer(conf)
        return self._consumer

    def _all_partitions(self) -> list[KafkaTopicPartition]:
        if self.partitions is not None:
            return sorted(self.partitions, key=lambda tp: (tp.topic, tp.partition))
        metadata = self._metadata_consumer().list_topics(timeout=30)
        if self.topics is not None:
            missing = [t for t in self.topics if t not in metadata.topics]
            if missing:
                raise RuntimeError(f"Partition discovery found no topic(s) {missing}")
            names = list(self.topics)
        else:
            pattern = re.compile(self.topic_pattern or "")
            names = sorted(t for t in metadata.topics if pattern.fullmatch(t))
        return [
            KafkaTopicPartition(name, p)
            for name in names
            for p in sorted(metadata.topics[name].partitions)
        ]

    def discover_splits(self, parallelism: int, known: dict[str, SourceSplit]) -> list[SourceSplit]:
        now = time.monotonic()
        if known and (
            self.discovery_interval_s < 0 or now - self._discovered_at < self.discovery_interval_s
        ):
            return []
        self._discovered_at = now
        new = [tp for tp in self._all_partitions() if repr(tp) not in known]
        if not new:
            return []
        consumer = self._metadata_consumer()
        # Partitions found after the first discovery are new: read from their start, as Flink.
        starting = self.starting if not known else KafkaOffsetsInitializer.earliest()
        start = starting.resolve(consumer, new)
        stop = self.stopping.resolve(consumer, new) if self.stopping is not None else {}
        return [
            SourceSplit(
                repr(tp),
                start[repr(tp)],
                stop.get(repr(tp)),
                {"topic": tp.topic, "partition": tp.partition},
            )
            for tp in new
        ]

    def prepare_ranges(self, splits: Sequence[SourceSplit]) -> None:
        """The log start and end of every split's partition, in two ``ListOffsets`` per
        leader (earliest, latest) instead of two round trips per partition; a partition
        whose answer has an error is asked alone by ``next_range`` (with its retries)."""
        self._planned = {}
        todo = [s for s in splits if s.end is None or s.position < s.end]
        if len(todo) < 2:
            return
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

        consumer = self._metadata_consumer()
        found: list[list[Any]] = []
        try:
            for which in (OFFSET_BEGINNING, OFFSET_END):  # ListOffsets' -2 and -1
                asked = [TopicPartition(s.info["topic"], s.info["partition"], which) for s in todo]
                found.append(consumer.offsets_for_times(asked, timeout=_BATCHED_OFFSETS_TIMEOUT_S))
        except KafkaException as exc:
            _LOG.info("Kafka offsets of %d partitions at once: %s; one by one", len(todo), exc)
            return
        for split, lo, high in zip(todo, found[0], found[1], strict=True):
            if lo.error is None and high.error is None and lo.offset >= 0 and high.offset >= 0:
                self._planned[split.split_id] = (int(lo.offset), int(high.offset))

    def next_range(self, split: SourceSplit, max_records: int) -> SplitRange | None:
        from confluent_kafka import TopicPartition

        if split.end is not None and split.position >= split.end:
            return SplitRange(split.split_id, split.position, split.position, split.info, True)
        tp = TopicPartition(split.info["topic"], split.info["partition"])
        planned = self._planned.pop(split.split_id, None)
        lo, high = planned if planned is not None else _watermarks(self._metadata_consumer(), tp)
        end = high if split.end is None else min(high, split.end)
        self._ends[split.split_id] = end
        start = split.position
        if start < lo:
            # Deleted before the job read them: fail, or (opted in) start at the log start;
            # ``advance`` counts the offsets skipped once the epoch is accepted.
            if not self.skip_deleted_records:
                raise RecordsDeletedError(
                    _deleted_message(
                        repr(KafkaTopicPartition(tp.topic, tp.partition)),
                        start,
                        lo,
                        "restored or planned",
                    )
                )
            start = min(lo, end)
            if split.end is not None and start >= split.end:
                return SplitRange(split.split_id, split.end, split.end, split.info, True, 0)
        hi = min(start + max_records, end)
        if hi <= start:
            return None
        last = split.end is not None and hi >= split.end
        # Offsets count records (transaction markers too, so at most ``hi - start``).
        return SplitRange(split.split_id, start, hi, split.info, last, hi - start)

    def advance(self, split: SourceSplit, split_range: SplitRange) -> None:
        """Move ``split`` past ``split_range``; offsets between its position and a range
        that starts later (deleted before they were read, skipped by choice) are counted,
        never as read."""
        skipped = split_range.start - split.position
        if skipped > 0:
            self._skipped[split.split_id] = self._skipped.get(split.split_id, 0) + skipped
            _LOG.warning(
                "Kafka partition %s: offsets [%d, %d) were deleted before the job read them; "
                "skipped (%s = true), %d so far",
                split.split_id,
                split.position,
                split_range.start,
                SKIP_DELETED_RECORDS,
                self._skipped[split.split_id],
            )
        super().advance(split, split_range)

    def notify_checkpoint_complete(self, checkpoint_id: int, splits: list[dict[str, Any]]) -> None:
        """Commit the checkpoint's offsets to the consumer group (with a group id and
        ``commit.offsets.on.checkpoint``): what monitoring reads as the group's progress. A
        failed commit is logged and the job goes on, as in Flink."""
        if not self.commit_offsets_on_checkpoint:
            return
        from confluent_kafka import TopicPartition

        offsets = [
            TopicPartition(s["info"]["topic"], s["info"]["partition"], s["position"])
            for s in splits
        ]
        if not offsets:
            return
        try:
            self._metadata_consumer().commit(offsets=offsets, asynchronous=False)
        except Exception as exc:  # monitoring only: the checkpoint holds the offsets
            _LOG.warning(
                "Committing the offsets of checkpoint %d to consumer group %s failed: %s",
                checkpoint_id,
                self.properties.get("group.id"),
                exc,
            )

    def check_restored_splits(self, splits: Any, where: str, field: str) -> None:
        """Refuse a restored split that is not a partition of this source's subscription or
        whose offsets are impossible, before any Kafka call: a snapshot is input from
        outside."""
        _check_list(splits, where, field)
        for i, split in enumerate(splits):
            at = f"{field}[{i}]"
            _check_dict(split, where, at)
            info = split.get("info")
            _check_dict(info, where, f"{at}.info")
            topic, partition = info.get("topic"), info.get("partition")
            if not isinstance(topic, str):
                _refuse(where, f"{at}.info.topic", topic, "is not a topic name")
            _check_offset(partition, where, f"{at}.info.partition")
            if not self._subscribed(topic, partition):
                _refuse(where, f"{at}.info.topic", topic, self._subscription())
            if split.get("split_id") != f"{topic}-{partition}":
                _refuse(
                    where, f"{at}.split_id", split.get("split_id"), f"is not '{topic}-{partition}'"
                )
            _check_offset(split.get("position"), where, f"{at}.position")
            if split.get("end") is not None:
                _check_offset(split.get("end"), where, f"{at}.end")
            if not isinstance(split.get("finished", False), bool):
                _refuse(where, f"{at}.finished", split.get("finished"), "is not true or false")

    def _subscribed(self, topic: str, partition: int) -> bool:
        if self.partitions is not None:
            return KafkaTopicPartition(topic, partition) in self.partitions
        if self.topics is not None:
            return topic in self.topics
        return re.fullmatch(self.topic_pattern or "", topic) is not None

    def _subscription(self) -> str:
        if self.partitions is not None:
            names = sorted(repr(tp) for tp in self.partitions)
            return f"(with its partition) is not among the source's partitions {names}"
        if self.topics is not None:
            return f"is not among the source's topics {self.topics}"
        return f"does not match the source's topic pattern {self.topic_pattern!r}"

    # -- the task's side ----------------------------------------------------------------
    def read(self, split_range: SplitRange) -> Iterator[Any]:
        for values, _timestamps in self.read_batches(split_range):
            yield from values

    def read_batches(self, split_range: SplitRange) -> Iterator[TimestampedBatch]:
        """The records of ``split_range`` in batches of up to ``consume()``'s size, with their
        Kafka timestamps (producer's or broker's, by the topic's ``message.timestamp.type``;
        None for a record without one)."""
        if split_range.end <= split_range.start:
            return
        conf = self._client_config("reader")
        # The end of the partition ends a range whose last offsets hold transaction markers:
        # librdkafka's position does not move past a marker no record follows.
        conf["enable.partition.eof"] = True
        # A range's records are in the partition already: no fetch need wait at the broker
        # for more. A long-polling fetch still in flight when the range ends (librdkafka
        # waits 500 ms by default) would hold back the next range's first fetch on the same
        # connection.
        conf.setdefault("fetch.wait.max.ms", _READER_FETCH_WAIT_MS)
        # As Flink's KafkaSourceBuilder: an offset out of the partition's range resets as
        # the starting offsets say. Below the log start ``_read_range`` notices the reset
        # and fails the range instead (records deleted after the driver planned it).
        conf["auto.offset.reset"] = _RESET[self.starting.get_auto_offset_reset_strategy()]
        key = tuple(sorted((k, str(v)) for k, v in conf.items() if k != "group.id"))
        consumer = READERS.take(key)
        if consumer is None:
            from confluent_kafka import Consumer

            # librdkafka's log lines, at most one a minute per reader (a stopped broker
            # makes many a second), through Python's logging.
            consumer = Consumer({**conf, "logger": ClientLog()})
        try:
            yield from self._read_range(consumer, split_range)
        except BaseException:
            consumer.close()  # a consumer that failed (or was abandoned) is not reused
            raise
        # Idle between ranges: no fetching, no prefetched records held (a closed generator
        # never gets here, and its consumer was closed above).
        consumer.unassign()
        READERS.put(key, consumer)

    def _read_range(self, consumer: Any, split_range: SplitRange) -> Iterator[TimestampedBatch]:
        """Read ``split_range`` with ``consumer`` (assigned to its start here)."""
        from confluent_kafka import (
            TIMESTAMP_NOT_AVAILABLE,
            KafkaError,
            KafkaException,
            TopicPartition,
        )

        topic, partition = split_range.info["topic"], split_range.info["partition"]
        consumer.assign([TopicPartition(topic, partition, split_range.start)])
        end = split_range.end
        deserialize = self.deserializer.deserialize_batch
        progress = time.monotonic()
        next_offset = split_range.start
        first = _FirstOffset(
            split_range.start, lambda: self._check_log_start(consumer, split_range)
        )
        while True:
            # Ask for no more than the range holds: consume() returns once it has them,
            # instead of waiting out its timeout while the partition grows past the range.
            messages = consumer.consume(max(1, min(_BATCH, end - next_offset)), 1.0)
            values: list[Any] = []
            timestamps: list[int | None] = []
            done = False
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._AUTO_OFFSET_RESET:
                        self._check_log_start(consumer, split_range)  # raises if below it
                    if err.code() != KafkaError._PARTITION_EOF:
                        refused = librdkafka_denied(err, "Fetch", topic)
                        raise refused if refused is not None else KafkaException(err)
                    # The end of the log ends the range only if it is this partition's and
                    # at or past the range's end: an end of another partition (this reused
                    # consumer's earlier range) or before the range's end (a transaction
                    # still open on the input) must not end it early, since the split's
                    # position moves to the range's end when the epoch succeeds.
                    if (m.topic(), m.partition()) != (topic, partition):
                        continue
                    first.seen(m.offset())
                    if m.offset() >= end:
                        done = True
                        break
                    continue
                offset = m.offset()
                first.seen(offset)
                if offset < next_offset:
                    continue  # never emit a record twice, nor one before the range
                if offset >= end:
                    done = True
                    break
                values.append(m.value())
                ts_type, ts = m.timestamp()
                timestamps.append(None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts)
                done = offset >= end - 1
                next_offset = offset + 1
            if values:
                progress = time.monotonic()
                yield _without_nulls(deserialize(values), timestamps)
            if done:
                return
            # Transaction markers and aborted records take offsets that yield no record.
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position > split_range.start:
                first.seen(position)
            if position >= end:
                return
            next_offset = max(next_offset, position)
            if time.monotonic() - progress > _STALL_SECONDS:
                raise RuntimeError(
                    f"Kafka partition {topic}-{partition}: no record at offsets "
                    f"[{position}, {end}) for {_STALL_SECONDS:.0f} s"
                )

    def _check_log_start(self, consumer: Any, split_range: SplitRange) -> None:
        """Fail the range if its partition's log start is now past the range's start: its
        first records were deleted after the driver planned it, and the consumer reset
        past them."""
        from confluent_kafka import TopicPartition

        topic, partition = split_range.info["topic"], split_range.info["partition"]
        lo, _hi = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=30, cached=False
        )
        if lo <= split_range.start:
            return
        message = _deleted_message(f"{topic}-{partition}", split_range.start, lo, "planned")
        if not self.skip_deleted_records:
            raise RecordsDeletedError(message)
        # Opted in: the epoch fails and the job restarts from its latest checkpoint, whose
        # position the driver then moves to the log start, counting what it skips.
        raise RuntimeError(f"{message} The job restarts to skip them, counted.")


class KafkaSourceBuilder:
    """PyFlink's ``KafkaSourceBuilder``: bootstrap servers, what to subscribe to and a value
    deserializer are required."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}
        self._topics: list[str] | None = None
        self._pattern: str | None = None
        self._partitions: set[KafkaTopicPartition] | None = None
        self._subscriber: str | None = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: KafkaOffsetsInitializer | None = None
        self._bounded = False
        self._deserializer: DeserializationSchema | None = None
        self._client_id_prefix: str | None = None

    def build(self) -> KafkaSource:
        """The source; fails as Flink's builder does when a required field is missing."""
        if "bootstrap.servers" not in self._props:
            raise ConfigurationError("Property bootstrap.servers is required but not provided")
        if self._subscriber is None:
            raise ConfigurationError(
                "No subscribe mode is specified, should be one of topics, topic pattern and "
                "partition set."
            )
        if self._deserializer is None:
            raise ConfigurationError("Deserialization schema is required but not provided.")
        commit = self._props.get("commit.offsets.on.checkpoint")
        if commit is not None:
            _flag(self._props, "commit.offsets.on.checkpoint", True)
            if commit.lower() == "true" and "group.id" not in self._props:
                raise ConfigurationError(
                    "Property group.id is required when offset commit is enabled "
                    "(commit.offsets.on.checkpoint = true)"
                )
        _flag(self._props, SKIP_DELETED_RECORDS, False)
        reset = self._props.get("auto.offset.reset")
        if reset is not None:
            _LOG.warning(
                "Property auto.offset.reset = %s is overridden by the starting offsets' "
                "reset strategy, as in Flink",
                reset,
            )
        uses_committed = any(
            i is not None and i.kind == "committed" for i in (self._starting, self._stopping)
        )
        if uses_committed and "group.id" not in self._props:
            raise ConfigurationError(
                "Property group.id is required when using committed offset for offsets initializer"
            )
        check_properties(self._props)
        source = KafkaSource(
            self._props,
            self._topics,
            self._pattern,
            self._partitions,
            self._starting,
            self._stopping,
            self._bounded,
            self._deserializer,
            self._client_id_prefix,
        )
        check_librdkafka(source._client_config("check"), "consumer")
        return source

    def _subscribe(self, mode: str, subscriber: str) -> None:
        if self._subscriber is not None:
            raise ConfigurationError(
                f"Cannot use {mode} for consumption because a {self._subscriber} is already "
                "set for consumption."
            )
        self._subscriber = subscriber

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSourceBuilder:
        """The Kafka cluster's bootstrap servers."""
        return self.set_property("bootstrap.servers", bootstrap_servers)

    def set_group_id(self, group_id: str) -> KafkaSourceBuilder:
        """The consumer group (committed offsets are read for it)."""
        return self.set_property("group.id", group_id)

    def set_topics(self, *topics: str) -> KafkaSourceBuilder:
        """Topics to read, all of which must exist."""
        self._subscribe("topics", "TopicListSubscriber")
        self._topics = list(topics)
        return self

    def set_topic_pattern(self, topic_pattern: str) -> KafkaSourceBuilder:
        """A regular expression the whole topic name must match."""
        self._subscribe("topic pattern", "TopicPatternSubscriber")
        self._pattern = topic_pattern
        return self

    def set_partitions(self, partitions: set[KafkaTopicPartition]) -> KafkaSourceBuilder:
        """Exactly these partitions."""
        self._subscribe("partitions", "PartitionSetSubscriber")
        self._partitions = set(partitions)
        return self

    def set_starting_offsets(
        self, starting_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """Where each partition starts (earliest by default)."""
        self._starting = starting_offsets_initializer
        return self

    def set_unbounded(
        self, stopping_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """A streaming source that still stops at the given offsets."""
        self._bounded = False
        self._stopping = stopping_offsets_initializer
        return self

    def set_bounded(
        self, stopping_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """A bounded source that ends at the given offsets."""
        self._bounded = True
        self._stopping = stopping_offsets_initializer
        return self

    def set_value_only_deserializer(
        self, deserialization_schema: DeserializationSchema
    ) -> KafkaSourceBuilder:
        """How a record's value becomes the stream's record (the key is ignored)."""
        self._deserializer = deserialization_schema
        return self

    def set_skip_deleted_records(self, skip: bool = True) -> KafkaSourceBuilder:
        """Where a position is below its partition's log start (records deleted before the
        job read them): continue from the log start, counting the skipped offsets in the
        source's ``sparkpoint.numRecordsSkipped`` metric, instead of failing the job (the
        default). The property ``sparkpoint.skip-deleted-records``."""
        return self.set_property(SKIP_DELETED_RECORDS, "true" if skip else "false")

    def set_client_id_prefix(self, prefix: str) -> KafkaSourceBuilder:
        """The prefix of the consumers' ``client.id``."""
        self._client_id_prefix = prefix
        return self

    def set_property(self, key: str, value: str) -> KafkaSourceBuilder:
        """A consumer property: Kafka's Java client names as PyFlink takes them (security
        ones translated, ``docs/kafka-source.md``) or librdkafka's."""
        self._props[key] = value
        return self

    def set_properties(self, props: dict[str, str]) -> KafkaSourceBuilder:
        """Several consumer properties."""
        for key, value in props.items():
            self.set_property(key, value)
        return self


def _watermarks(consumer: Any, tp: Any) -> tuple[int, int]:
    """The partition's log start and end, asked of its leader; a retriable error (a leader
    that moved: ``NOT_LEADER_FOR_PARTITION`` until librdkafka's metadata catches up) is
    asked again, for up to ``_WATERMARK_RETRY_SECONDS``."""
    from confluent_kafka import KafkaError, KafkaException

    transient = {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._UNKNOWN_PARTITION,  # metadata not yet refreshed after a move
    }
    deadline = time.monotonic() + _WATERMARK_RETRY_SECONDS
    while True:
        try:
            lo, high = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
            return int(lo), int(high)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            code = error.code() if isinstance(error, KafkaError) else None
            if code not in transient or time.monotonic() > deadline:
                raise
            _LOG.info("Kafka partition %s-%d: %s; asking again", tp.topic, tp.partition, error)
            time.sleep(0.5)


class _FirstOffset:
    """The first offset a reader's consumer reaches in a range, checked once: past the
    range's start it is transaction markers, compaction, or a reset past records deleted
    since the driver planned the range (``KafkaSource._check_log_start`` tells which)."""

    def __init__(self, start: int, check: Callable[[], None]) -> None:
        self._start = start
        self._check = check
        self._checked = False

    def seen(self, offset: int) -> None:
        """The consumer reached ``offset`` (a record, the end of the log, or its position
        once past the start)."""
        if self._checked or offset < 0:
            return
        self._checked = True
        if offset > self._start:
            self._check()


def _deleted_message(partition: str, position: int, log_start: int, what: str) -> str:
    return (
        f"Kafka partition {partition}: the {what} position {position} is below the "
        f"partition's log start {log_start}; the records at offsets [{position}, {log_start}) "
        "were deleted (retention or DeleteRecords) before the job read them. Restore from a "
        f"newer checkpoint, or set the source's property {SKIP_DELETED_RECORDS}=true "
        "(KafkaSourceBuilder.set_skip_deleted_records) to continue from the log start, "
        "counting the skipped offsets in the source's sparkpoint.numRecordsSkipped metric."
    )


def _without_nulls(
    records: list[Any], timestamps: list[int | None]
) -> tuple[list[Any], list[int | None]]:
    """A deserializer's None is no record (Flink's collector drops a null record)."""
    if all(r is not None for r in records):
        return records, timestamps
    kept = [(r, t) for r, t in zip(records, timestamps) if r is not None]
    return [r for r, _t in kept], [t for _r, t in kept]


def _flag(props: dict[str, str], key: str, default: bool) -> bool:
    """A boolean property: ``true`` or ``false`` (any case)."""
    value = props.get(key)
    if value is None:
        return default
    if str(value).lower() not in ("true", "false"):
        raise ConfigurationError(f"Property {key} must be true or false, got {value!r}")
    return str(value).lower() == "true"


def _refuse(where: str, field: str, value: Any, why: str) -> None:
    raise RestoreError(
        f"{where}: {field} = {value!r} {why}; a restored Kafka split must be a partition of "
        "the source's subscription with non-negative integer offsets. Refusing to restore."
    )


def _check_list(value: Any, where: str, field: str) -> None:
    if not isinstance(value, list):
        _refuse(where, field, value, "is not a list of splits")


def _check_dict(value: Any, where: str, field: str) -> None:
    if not isinstance(value, dict):
        _refuse(where, field, value, "is not an object")


def _check_offset(value: Any, where: str, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _refuse(where, field, value, "is not an integer")
    if value < 0:
        _refuse(where, field, value, "is negative")
