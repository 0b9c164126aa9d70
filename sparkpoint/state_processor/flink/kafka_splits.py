"""A Flink ``KafkaSource``'s split offsets in a savepoint, as sparkpoint's ``KafkaSource``
restores its splits.

Flink's ``SourceOperator`` keeps its reader's splits in the operator list state
``SourceReaderState``: per split a byte array of ``SimpleVersionedSerialization`` (the
serializer's version, the length, the bytes) around flink-connector-kafka's
``KafkaPartitionSplitSerializer`` (version 0): the topic (``writeUTF``), the partition (int),
the next offset to read and the stopping offset (longs; ``Long.MIN_VALUE``: none). Negative
offsets are markers the reader resolves against the broker when it starts. A split is
input from outside: topic names, partitions and offsets are checked before use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.metadata import FlinkMetadata
from sparkpoint.state_processor.flink.operator_state import read_byte_array_list_state
from sparkpoint.state_processor.flink.pyflink_state import find_operator

__all__ = ["SPLITS_STATE_NAME", "KafkaSplit", "decode_kafka_split", "read_kafka_splits"]

SPLITS_STATE_NAME = "SourceReaderState"  # SourceOperator's reader state
SERIALIZER_VERSION = 0  # KafkaPartitionSplitSerializer.CURRENT_VERSION
NO_STOPPING_OFFSET = -(1 << 63)  # also MIGRATED as a starting offset
LATEST_OFFSET = -1
EARLIEST_OFFSET = -2
COMMITTED_OFFSET = -3
MARKERS = {
    LATEST_OFFSET: "LATEST_OFFSET (the end of the partition when the reader starts)",
    EARLIEST_OFFSET: "EARLIEST_OFFSET",
    COMMITTED_OFFSET: "COMMITTED_OFFSET (the consumer group's offset when the reader starts)",
    NO_STOPPING_OFFSET: "MIGRATED (an offset to be taken from a legacy consumer's state)",
}
# Kafka's Topic.validate: 1 to 249 of these characters, and not "." or "..".
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True)
class KafkaSplit:
    """One partition and the next offset to read; ``stopping_offset`` None when unbounded."""

    topic: str
    partition: int
    offset: int
    stopping_offset: int | None

    def to_sparkpoint(self) -> dict[str, Any]:
        """The split as sparkpoint's ``KafkaSource`` snapshots it (``SourceSplit.to_json``)."""
        return {
            "split_id": f"{self.topic}-{self.partition}",
            "position": self.offset,
            "end": self.stopping_offset,
            "info": {"topic": self.topic, "partition": self.partition},
            "finished": False,
        }


def decode_kafka_split(data: bytes, where: str) -> KafkaSplit | None:
    """One ``SourceReaderState`` element; None for a split Flink had not started reading
    (its offset still ``EARLIEST_OFFSET``: sparkpoint discovers it and reads it from the
    earliest offset, as Flink would). Other markers are refused: only a broker can resolve
    them, and Flink resolves them when the restored reader starts."""
    inp = DataInput(data, f"{where}: a Kafka split")
    version = inp.i32()
    if version != SERIALIZER_VERSION:
        raise UnsupportedFlinkStateError(
            f"{where}: a Kafka split of serializer version {version}; this importer knows "
            f"KafkaPartitionSplitSerializer version {SERIALIZER_VERSION} (flink-connector-kafka "
            "3.x to 5.x); is the source a KafkaSource?"
        )
    body = DataInput(inp.sized_bytes("a Kafka split"), f"{where}: a Kafka split")
    if inp.remaining:
        raise inp.fail("bytes after a Kafka split")
    topic = body.utf()
    partition = body.i32()
    offset = body.i64()
    stopping = body.i64()
    if body.remaining:
        raise body.fail(
            "bytes after the split's stopping offset (not a KafkaPartitionSplit: is the "
            "source a KafkaSource?)"
        )
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise FlinkFormatError(
            f"{where}: a Kafka split names the topic {topic!r}, which is not a legal topic "
            "name (1 to 249 of a-z, A-Z, 0-9, '.', '_', '-'; not '.' or '..')"
        )
    split = f"{topic}-{partition}"
    if partition < 0:
        raise FlinkFormatError(f"{where}: Kafka split {split}: partition {partition} < 0")
    if offset == EARLIEST_OFFSET:
        return None
    if offset < 0:
        what = MARKERS.get(offset)
        if what is None:
            raise FlinkFormatError(f"{where}: Kafka split {split}: offset {offset} < 0")
        raise UnsupportedFlinkStateError(
            f"{where}: Kafka split {split} starts at the marker {what}, which only the broker "
            "can resolve; take the savepoint once the job has read from every partition"
        )
    if stopping == NO_STOPPING_OFFSET:
        return KafkaSplit(topic, partition, offset, None)
    if stopping < 0:
        what = MARKERS.get(stopping)
        if what is None:
            raise FlinkFormatError(f"{where}: Kafka split {split}: stopping offset {stopping} < 0")
        raise UnsupportedFlinkStateError(
            f"{where}: Kafka split {split} stops at the marker {what}, which only the broker "
            "can resolve; bound the Flink source by given offsets or a timestamp"
        )
    return KafkaSplit(topic, partition, offset, stopping)


def read_kafka_splits(metadata: FlinkMetadata, uid: str, what: str) -> list[KafkaSplit]:
    """Every split of the Kafka source ``uid`` over all its subtasks; a partition held twice
    is refused (corrupt: Flink assigns each partition to one reader)."""
    op = find_operator(metadata, uid, what)
    splits: dict[tuple[str, int], KafkaSplit] = {}
    found_state = False
    for sub in op.subtasks:
        where = f"{what}: operator {uid!r} subtask {sub.index}"
        if sub.managed_keyed_state is not None:
            raise UnsupportedFlinkStateError(
                f"{where}: the operator named as a Kafka source has keyed state; a source "
                "has none (is the uid the source's?)"
            )
        handle = sub.managed_operator_state
        if handle is None:
            continue
        found_state = found_state or SPLITS_STATE_NAME in handle.states
        for element in read_byte_array_list_state(handle, SPLITS_STATE_NAME, where):
            split = decode_kafka_split(element, where)
            if split is None:
                continue
            tp = (split.topic, split.partition)
            if tp in splits:
                raise FlinkFormatError(
                    f"{where}: Kafka split {split.topic}-{split.partition} is held by two readers"
                )
            splits[tp] = split
    if not found_state and op.subtasks:
        raise UnsupportedFlinkStateError(
            f"{what}: operator {uid!r} has no {SPLITS_STATE_NAME} operator state: it is not "
            "a source of the new source API (a KafkaSource)"
        )
    return sorted(splits.values(), key=lambda s: (s.topic, s.partition))
