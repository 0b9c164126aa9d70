"""Kafka source splits of a Flink savepoint: decoding ``KafkaPartitionSplitSerializer``'s
bytes and every refusal, with the message it gives (issue 42). The real savepoints of
kafka_counts.py check the layout itself (test_flink_kafka_import.py)."""

from __future__ import annotations

import struct

import pytest

from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.kafka_splits import KafkaSplit, decode_kafka_split
from tests.state_processor.flink_bytes import utf

NONE = -(1 << 63)


def split_bytes(
    topic: str, partition: int, offset: int, stopping: int = NONE, version: int = 0
) -> bytes:
    body = utf(topic) + struct.pack(">iqq", partition, offset, stopping)
    return struct.pack(">ii", version, len(body)) + body


def test_decodes_a_split_as_sparkpoint_restores_it() -> None:
    split = decode_kafka_split(split_bytes("in.put_1-x", 3, 42), "sp")
    assert split == KafkaSplit("in.put_1-x", 3, 42, None)
    assert split.to_sparkpoint() == {
        "split_id": "in.put_1-x-3",
        "position": 42,
        "end": None,
        "info": {"topic": "in.put_1-x", "partition": 3},
        "finished": False,
    }
    bounded = decode_kafka_split(split_bytes("t", 0, 5, 9), "sp")
    assert bounded is not None and bounded.to_sparkpoint()["end"] == 9


def test_a_split_not_yet_read_is_left_to_discovery() -> None:
    assert decode_kafka_split(split_bytes("t", 0, -2), "sp") is None


@pytest.mark.parametrize(
    ("offset", "stopping", "message"),
    [
        (-1, NONE, "sp: Kafka split t-0 starts at the marker LATEST_OFFSET"),
        (-3, NONE, "sp: Kafka split t-0 starts at the marker COMMITTED_OFFSET"),
        (NONE, NONE, "sp: Kafka split t-0 starts at the marker MIGRATED"),
        (5, -1, "sp: Kafka split t-0 stops at the marker LATEST_OFFSET"),
        (5, -3, "sp: Kafka split t-0 stops at the marker COMMITTED_OFFSET"),
    ],
)
def test_refuses_offset_markers_only_a_broker_resolves(
    offset: int, stopping: int, message: str
) -> None:
    with pytest.raises(UnsupportedFlinkStateError, match="only the broker can resolve") as e:
        decode_kafka_split(split_bytes("t", 0, offset, stopping), "sp")
    assert str(e.value).startswith(message)


@pytest.mark.parametrize(
    ("topic", "partition", "offset", "stopping", "message"),
    [
        ("bad topic", 0, 1, NONE, "names the topic 'bad topic', which is not a legal topic"),
        ("", 0, 1, NONE, "names the topic '', which is not a legal topic"),
        ("..", 0, 1, NONE, "names the topic '..', which is not a legal topic"),
        ("x" * 250, 0, 1, NONE, "which is not a legal topic name"),
        ("t", -1, 1, NONE, "Kafka split t--1: partition -1 < 0"),
        ("t", 0, -7, NONE, "Kafka split t-0: offset -7 < 0"),
        ("t", 0, 1, -9, "Kafka split t-0: stopping offset -9 < 0"),
    ],
)
def test_refuses_impossible_splits(
    topic: str, partition: int, offset: int, stopping: int, message: str
) -> None:
    with pytest.raises(FlinkFormatError, match="sp: ") as e:
        decode_kafka_split(split_bytes(topic, partition, offset, stopping), "sp")
    assert message in str(e.value)


def test_refuses_other_serializers_and_trailing_bytes() -> None:
    with pytest.raises(UnsupportedFlinkStateError, match="serializer version 1; this importer"):
        decode_kafka_split(split_bytes("t", 0, 1, version=1), "sp")
    extra = split_bytes("t", 0, 1)
    body = extra[8:] + b"\x00"
    with pytest.raises(FlinkFormatError, match="bytes after the split's stopping offset"):
        decode_kafka_split(struct.pack(">ii", 0, len(body)) + body, "sp")
    with pytest.raises(FlinkFormatError, match="bytes after a Kafka split"):
        decode_kafka_split(extra + b"\x00", "sp")
    for cut in range(len(extra)):
        with pytest.raises(FlinkFormatError):
            decode_kafka_split(extra[:cut], "sp")
