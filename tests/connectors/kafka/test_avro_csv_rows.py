"""PyFlink's Avro and CSV row schemas through Kafka: a job reads the Avro bytes PyFlink 2.3
wrote (tests/connectors/formats/pyflink_recorded.json, case "primitives") with
``AvroRowDeserializationSchema``, keeps three fields and writes them with
``CsvRowSerializationSchema``; the output topic holds exactly the CSV lines written out
below by hand (Jackson's quoting: a space or a string over 24 characters is quoted)."""

from __future__ import annotations

import base64
import collections
import json
from typing import Any

from sparkpoint.common import Types
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from sparkpoint.datastream.formats.avro import AvroRowDeserializationSchema
from sparkpoint.datastream.formats.csv import CsvRowSerializationSchema
from sparkpoint.types import Row
from tests.connectors.formats import cases
from tests.connectors.kafka.kafka_jobs import read_committed
from tests.connectors.kafka.source_jobs import produce, source_env
from tests.fixtures.kafka import KafkaBroker

OUT_TYPE = Types.ROW_NAMED(["s", "l", "d"], [Types.STRING(), Types.LONG(), Types.DOUBLE()])
OUTPUT = [
    "hello,2,2.25\n",
    ",-9223372036854775808,1.0E300\n",
    '"\u00e9t\u00e9 \U0001f600 \u65e5\u672c",9223372036854775807,-4.9E-324\n',
    '"' + "a" * 200 + '",64,0.1\n',
]


def _keep(row: Row) -> Row:
    return Row(s=row.s, l=row.l, d=row.d)


def test_avro_in_csv_out_through_kafka(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    recorded = json.loads(cases.RECORDED.read_text(encoding="utf-8"))
    written = [base64.b64decode(w) for w in recorded["avro"]["primitives"]["written"]]
    schema = json.dumps(
        next(c for c in cases.load_cases()["avro"] if c["name"] == "primitives")["schema"]
    )
    bootstrap = kafka_broker.bootstrap_servers
    source_topic, sink_topic = "avro-rows-in", "csv-rows-out"
    kafka_broker.create_topic(source_topic, 2)
    kafka_broker.create_topic(sink_topic, 1)
    produce(bootstrap, source_topic, [(i % 2, data, None) for i, data in enumerate(written)])
    env = source_env(spark, tmp_path, per_split=2, checkpoint_ms=None)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(source_topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(AvroRowDeserializationSchema(avro_schema_string=schema))
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(sink_topic)
            .set_value_serialization_schema(CsvRowSerializationSchema.Builder(OUT_TYPE).build())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
        .build()
    )
    env.from_source(source, None, "avro").map(_keep).sink_to(sink)
    result = env.execute("avro-csv-rows")
    assert result.records_in == len(written) == 4
    assert collections.Counter(read_committed(bootstrap, sink_topic)) == collections.Counter(OUTPUT)
