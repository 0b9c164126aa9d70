"""Kafka source splits of a Flink savepoint: decoding ``KafkaPartitionSplitSerializer``'s
bytes and every refusal, with the message it gives (issue 42). The real savepoints of
kafka_counts.py check the layout itself (test_flink_kafka_import.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from sparkpoint.state_processor.flink import FlinkMetadata, read_metadata_file
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.kafka_splits import (
    KafkaSplit,
    decode_kafka_split,
    read_kafka_splits,
)
from sparkpoint.state_processor.flink.source_state import kafka_source_state
from tests.state_processor import flink_bytes as fb
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


# -- the SourceReaderState operator state around the splits (synthetic savepoints) ----------

LONG = "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"


def operator_stream(
    elements: list[bytes],
    name: str = "SourceReaderState",
    serializer: str = fb.BYTES,
    compressed: bool = False,
) -> tuple[bytes, list[int]]:
    """An operator state stream of one list state; returns it and the elements' offsets."""
    meta = fb.utf(name) + struct.pack(">ii", 1, 1)
    meta += fb.utf("OPERATOR_STATE_DISTRIBUTION_MODE") + fb.utf("SPLIT_DISTRIBUTE")
    meta += struct.pack(">i", 1) + fb.utf("VALUE_SERIALIZER")
    meta += fb.proxied(fb.simple_snapshot(serializer))
    out = bytearray(struct.pack(">i", 6) + (b"\x01" if compressed else b"\x00"))
    out += struct.pack(">h", 1) + meta + struct.pack(">h", 0)
    offsets = []
    for e in elements:
        offsets.append(len(out))
        out += struct.pack(">i", len(e)) + e
    return bytes(out), offsets


def source_savepoint(
    tmp_path: Path, subtasks: list[tuple[bytes, list[int]]], mode: int = 0
) -> FlinkMetadata:
    bodies = []
    for i, (stream, offsets) in enumerate(subtasks):
        (tmp_path / f"op-{i}").write_bytes(stream)
        handle = b"\x04" + struct.pack(">i", 1) + fb.utf("SourceReaderState") + bytes([mode])
        handle += struct.pack(">i", len(offsets)) + b"".join(struct.pack(">q", o) for o in offsets)
        handle += b"\x06" + fb.utf(f"op-{i}") + struct.pack(">q", len(stream))
        bodies.append(
            struct.pack(">i", 1) + handle + struct.pack(">i", 0) + b"\x00\x00" + b"\0" * 8
        )
    data = fb.metadata(5, [fb.operator("source", bodies, parallelism=len(bodies))])
    (tmp_path / "_metadata").write_bytes(data)
    return read_metadata_file(str(tmp_path))


def test_reads_splits_over_subtasks(tmp_path: Path) -> None:
    meta = source_savepoint(
        tmp_path,
        [operator_stream([split_bytes("t", 1, 7)]), operator_stream([split_bytes("t", 0, 3, 9)])],
    )
    assert read_kafka_splits(meta, "source", "sp") == [
        KafkaSplit("t", 0, 3, 9),
        KafkaSplit("t", 1, 7, None),
    ]


@pytest.mark.parametrize(
    ("streams", "mode", "error", "message"),
    [
        (
            [operator_stream([split_bytes("t", 0, 1)]), operator_stream([split_bytes("t", 0, 2)])],
            0,
            FlinkFormatError,
            "sp: operator 'source' subtask 1: Kafka split t-0 is held by two readers",
        ),
        (
            [operator_stream([split_bytes("t", 0, 1)])],
            1,
            UnsupportedFlinkStateError,
            "sp: operator 'source' subtask 0: operator state 'SourceReaderState' is UNION "
            "state; only split-distributed list state is read",
        ),
        (
            [operator_stream([split_bytes("t", 0, 1)], serializer=LONG)],
            0,
            UnsupportedFlinkStateError,
            "sp: operator 'source' subtask 0: operator state 'SourceReaderState' is OPERATOR "
            "state of long serializer; only list state of byte arrays is read",
        ),
        (
            [operator_stream([split_bytes("t", 0, 1)], name="other")],
            0,
            FlinkFormatError,
            "sp: operator 'source' subtask 0: _metadata names operator state "
            "'SourceReaderState', its stream has ['other']",
        ),
        (
            [operator_stream([split_bytes("t", 0, 1)], compressed=True)],
            0,
            UnsupportedFlinkStateError,
            "sp: operator 'source' subtask 0: the operator state is Snappy-compressed "
            "(execution.checkpointing.snapshot-compression), which is not read for operator "
            "state; take the savepoint without compression",
        ),
    ],
)
def test_refuses_operator_state_it_cannot_read(
    tmp_path: Path, streams: list, mode: int, error: type, message: str
) -> None:
    meta = source_savepoint(tmp_path, streams, mode)
    with pytest.raises(error) as e:
        read_kafka_splits(meta, "source", "sp")
    assert str(e.value) == message


def test_refuses_element_offsets_outside_the_stream(tmp_path: Path) -> None:
    stream, _ = operator_stream([split_bytes("t", 0, 1)])
    meta = source_savepoint(tmp_path, [(stream, [3])])
    with pytest.raises(FlinkFormatError, match=r"at offset 3, outside the stream's state bytes"):
        read_kafka_splits(meta, "source", "sp")
    meta = source_savepoint(tmp_path, [(stream, [len(stream)])])
    with pytest.raises(FlinkFormatError, match="outside the stream's state bytes"):
        read_kafka_splits(meta, "source", "sp")


def test_source_state_names_a_job_when_signed_and_each_uid_once(tmp_path: Path) -> None:
    from sparkpoint.checkpoint.trust import SnapshotTrust, default_trust, use_by_default

    meta = source_savepoint(tmp_path, [operator_stream([split_bytes("t", 0, 1)])])
    with pytest.raises(ValueError, match=r"Kafka source uids \['source', 'source'\] name one"):
        kafka_source_state(meta, ["source", "source"], None, "sp")
    before = default_trust()
    use_by_default(SnapshotTrust(signing_key=b"k" * 32))
    try:
        with pytest.raises(ValueError, match="A signing key is configured") as e:
            kafka_source_state(meta, ["source"], None, "sp")
        assert "pass the sparkpoint job's name (job_name=..., --job-name)" in str(e.value)
        (state,) = kafka_source_state(meta, ["source"], "job", "sp")
        assert state.to_json()["job_name"] == "job"
    finally:
        use_by_default(before)
