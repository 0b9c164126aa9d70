"""The exactly-once Kafka sink checks committables from a restored snapshot before any Kafka
call: a transactional id without the job's prefix, an impossible producer id, epoch or
transaction start time, or a topic not of this sink is refused with an error naming the
``_metadata``, the field and the value (issue 29 item 1, for Kafka). No broker: a refused
commit opens no socket."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from sparkpoint.common import SimpleStringSchema
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaRecordSerializationSchema,
    KafkaSink,
)
from sparkpoint.errors import MetadataFormatError

WHERE = "checkpoint metadata file /ckpt/job/chk-4/_metadata, field pending_sink_commits['sink']"
GOOD = {"transactional_id": "job-a-0-3", "producer_id": 7, "producer_epoch": 0, "topics": ["out"]}
_CONNECTS: list[Any] = []
_AUDITING: list[bool] = [False]


def _audit(event: str, args: Any) -> None:
    if _AUDITING[0] and event == "socket.connect":
        _CONNECTS.append(args[1])


sys.addaudithook(_audit)


@pytest.fixture
def connects() -> Iterator[list[Any]]:
    """The socket connections made while the test runs."""
    _CONNECTS.clear()
    _AUDITING[0] = True
    try:
        yield _CONNECTS
    finally:
        _AUDITING[0] = False


def _sink() -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:9")  # nothing listens: any call would hang on it
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic("out")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("job-a")
        .build()
    )


BAD = [
    ("transactional_id", "other-0-3"),
    ("transactional_id", "job-ab-0-3"),
    ("transactional_id", "job-a-0-3-x"),
    ("transactional_id", 5),
    ("producer_id", -1),
    ("producer_id", "7"),
    ("producer_id", True),
    ("producer_epoch", 32768),
    ("transactional_id", "job-a-\u0663-3"),  # ARABIC-INDIC DIGIT THREE
    ("transactional_id", "job-a-0-\uff13"),  # FULLWIDTH DIGIT THREE
    ("transactional_id", "job-a-\u00b2-3"),  # SUPERSCRIPT TWO
    ("topics", "out"),
    ("topics", ["out", "secrets"]),
    ("topics", ["out", "a/b"]),
    ("topics", ["out", ""]),
    ("transaction_start_time_ms", -2),
    ("transaction_start_time_ms", "1795807586039"),
    ("transaction_start_time_ms", 1.5),
    ("transaction_start_time_ms", False),
    ("transaction_start_time_ms", None),
]


@pytest.mark.parametrize(("field", "value"), BAD, ids=[f"{f}={v!r}" for f, v in BAD])
def test_restored_committable_refused(field: str, value: Any, connects: list[Any]) -> None:
    bad = {**GOOD, field: value}
    with pytest.raises(MetadataFormatError) as e:
        _sink().check_restored([GOOD, bad], "job-id", WHERE)
    shown = value[1] if field == "topics" and isinstance(value, list) else value
    assert f"committable 1 {field} {shown!r} in {WHERE}" in str(e.value)
    with pytest.raises(MetadataFormatError, match=f"committable 0 {field}"):
        _sink().commit([bad])  # the commit path checks too, before any Kafka call
    assert connects == []


@pytest.mark.parametrize("committable", [["job-a-0-3", 7, 0], {**GOOD, "extra": 1}, {}])
def test_malformed_committable_refused(committable: Any, connects: list[Any]) -> None:
    with pytest.raises(MetadataFormatError, match=r"committable 0 .* is not a mapping of exactly"):
        _sink().check_restored([committable], "job-id", WHERE)
    with pytest.raises(MetadataFormatError):
        _sink().abort_lingering([committable])
    assert connects == []


def _selector_sink() -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:9")
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic_selector(lambda v: f"t-{v}")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("job-a")
        .build()
    )


def test_topic_selector_commits_of_an_untrusted_snapshot_are_refused(
    connects: list[Any],
) -> None:
    """With a topic selector, only the job's own (or a signed) snapshot says which topics
    the job wrote; one from elsewhere naming any topic is refused, naming the opt-in."""
    other = {**GOOD, "topics": ["t-1", "payments"]}
    _selector_sink().check_restored([GOOD, other], "job-id", WHERE)  # trusted: its record
    with pytest.raises(MetadataFormatError) as e:
        _selector_sink().check_restored([GOOD, other], "job-id", WHERE, trusted=False)
    assert str(e.value) == (
        f"Refusing the Kafka sink's committable 0 topics 'out' in {WHERE}: it is a topic of a "
        "sink with a topic selector, named by an untrusted snapshot: not one the job is known "
        "to have written. A restored snapshot's sink commits must name transactions this "
        "sink wrote."
    )
    _selector_sink().check_restored([{**GOOD, "topics": []}], "job-id", WHERE, trusted=False)
    with pytest.raises(MetadataFormatError, match=r"topics '\.\.' in .* is not a Kafka topic"):
        _selector_sink().check_restored([{**GOOD, "topics": [".."]}], "job-id", WHERE)
    assert connects == []


def test_own_committables_pass() -> None:
    """Committables with a start time, and those of older checkpoints without one."""
    started = {**GOOD, "transaction_start_time_ms": 1795807586039}
    unknown = {**GOOD, "transaction_start_time_ms": -1}
    _sink().check_restored([GOOD, {**GOOD, "transactional_id": "job-a-12-0"}], "job-id", WHERE)
    _sink().check_restored([started, unknown, GOOD], "job-id", WHERE)
