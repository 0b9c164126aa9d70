"""PyFlink's JSON row schemas (``pyflink.datastream.formats.json``) through Kafka: a job reads
JSON objects as ``Row``s of a ``RowTypeInfo`` (missing fields None, unreadable messages
skipped with ``ignore_parse_errors``), changes them and writes them back as JSON; the
output topic holds exactly the expected JSON texts. The options' errors are tested
without Spark."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from sparkpoint.common import Types
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from sparkpoint.datastream.formats.json import (
    JsonRowDeserializationSchema,
    JsonRowSerializationSchema,
)
from sparkpoint.errors import ConfigurationError
from sparkpoint.types import Row
from tests.connectors.kafka.kafka_jobs import read_committed
from tests.connectors.kafka.source_jobs import produce, source_env
from tests.fixtures.kafka import KafkaBroker

ROW = Types.ROW_NAMED(
    ["id", "name", "score", "tags"],
    [Types.LONG(), Types.STRING(), Types.DOUBLE(), Types.BASIC_ARRAY(Types.STRING())],
)

INPUT = [
    '{"id": 1, "name": "ada", "score": 1.5, "tags": ["x", "y"]}',
    '{"tags": [], "score": 5e9, "name": "bob", "id": 2, "unknown": true}',
    '{"id": 3}',  # missing fields read as None
    "not json",  # skipped (ignore_parse_errors)
    '{"id": "three"}',  # not a LONG: skipped
    '{"id": 4, "name": "\u00e9mile", "score": null, "tags": ["\\u00e9", null]}',
]
# Doubled scores, upper-case names, reversed tags; Java's Double.toString for doubles.
OUTPUT = [
    '{"id":1,"name":"ADA","score":3.0,"tags":["y","x"]}',
    '{"id":2,"name":"BOB","score":1.0E10,"tags":[]}',
    '{"id":3,"name":null,"score":null,"tags":null}',
    '{"id":4,"name":"\u00c9MILE","score":null,"tags":[null,"\u00e9"]}',
]


def _change(row: Row) -> Row:
    return Row(
        id=row.id,
        name=None if row.name is None else row.name.upper(),
        score=None if row.score is None else row.score * 2,
        tags=None if row.tags is None else list(reversed(row.tags)),
    )


def test_json_rows_through_kafka(spark: Any, tmp_path: Any, kafka_broker: KafkaBroker) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source_topic, sink_topic = "json-rows-in", "json-rows-out"
    kafka_broker.create_topic(source_topic, 2)
    kafka_broker.create_topic(sink_topic, 1)
    produce(bootstrap, source_topic, [(i % 2, text, None) for i, text in enumerate(INPUT)])
    env = source_env(spark, tmp_path, per_split=2, checkpoint_ms=None)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(source_topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(
            JsonRowDeserializationSchema.builder().type_info(ROW).ignore_parse_errors().build()
        )
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(sink_topic)
            .set_value_serialization_schema(
                JsonRowSerializationSchema.builder().with_type_info(ROW).build()
            )
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
        .build()
    )
    env.from_source(source, None, "json").map(_change).sink_to(sink)
    result = env.execute("json-rows")
    assert result.records_in == len(INPUT) - 2
    assert collections.Counter(read_committed(bootstrap, sink_topic)) == collections.Counter(OUTPUT)


def test_json_row_schema_options() -> None:
    message = b'{"id": 3}'
    plain = JsonRowDeserializationSchema.builder().type_info(ROW).build()
    assert plain.deserialize(message) == Row(id=3, name=None, score=None, tags=None)
    strict = JsonRowDeserializationSchema.builder().type_info(ROW).fail_on_missing_field().build()
    with pytest.raises(ValueError, match=r"Failed to deserialize JSON '\{\"id\": 3\}'.*'name'"):
        strict.deserialize(message)
    with pytest.raises(ValueError, match="Failed to deserialize JSON 'not json'"):
        plain.deserialize(b"not json")
    with pytest.raises(ConfigurationError, match="failOnMissingField and ignoreParseErrors"):
        (
            JsonRowDeserializationSchema.builder()
            .type_info(ROW)
            .fail_on_missing_field()
            .ignore_parse_errors()
            .build()
        )
    with pytest.raises(TypeError, match="Typeinfo should be set"):
        JsonRowSerializationSchema.builder().build()
    with pytest.raises(ConfigurationError, match="RowTypeInfo"):
        JsonRowDeserializationSchema.builder().type_info(Types.LONG()).build()
    writer = JsonRowSerializationSchema.builder().with_type_info(ROW).build()
    with pytest.raises(ValueError, match="Could not serialize row"):
        writer.serialize(Row(1, "a"))
    nested = Types.ROW_NAMED(
        ["at", "raw", "counts", "inner"],
        [
            Types.SQL_DATE(),
            Types.PRIMITIVE_ARRAY(Types.BYTE()),
            Types.MAP(Types.STRING(), Types.INT()),
            Types.ROW_NAMED(["f"], [Types.FLOAT()]),
        ],
    )
    import datetime

    value = Row(
        at=datetime.date(2024, 2, 29), raw=b"\x00\xff", counts={"a": 1}, inner=Row(f=2.5e10)
    )
    text = JsonRowSerializationSchema.builder().with_type_info(nested).build().serialize(value)
    assert text == b'{"at":"2024-02-29","raw":"AP8=","counts":{"a":1},"inner":{"f":2.49999995E10}}'
    back = JsonRowDeserializationSchema.builder().type_info(nested).build().deserialize(text)
    assert back == Row(
        at=datetime.date(2024, 2, 29), raw=b"\x00\xff", counts={"a": 1}, inner=Row(f=2.49999995e10)
    )
