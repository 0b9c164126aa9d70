"""The Kafka connector's builders under PyFlink's names, with Flink's validation errors."""

from __future__ import annotations

import pytest

import sparkpoint.datastream.connectors as connectors
from sparkpoint.common import SimpleStringSchema
from sparkpoint.datastream.connectors.base import DeliveryGuarantee as BaseDeliveryGuarantee
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaTopicPartition,
    KafkaTopicSelector,
)
from sparkpoint.errors import ConfigurationError


def _source_builder():  # type: ignore[no-untyped-def]
    return (
        KafkaSource.builder()
        .set_bootstrap_servers("127.0.0.1:9092")
        .set_value_only_deserializer(SimpleStringSchema())
    )


def test_delivery_guarantee_where_pyflink_has_it() -> None:
    assert connectors.DeliveryGuarantee is DeliveryGuarantee is BaseDeliveryGuarantee
    assert [g.name for g in DeliveryGuarantee] == ["EXACTLY_ONCE", "AT_LEAST_ONCE", "NONE"]


def test_source_needs_servers_subscription_and_deserializer() -> None:
    with pytest.raises(ConfigurationError, match=r"Property bootstrap\.servers is required"):
        KafkaSource.builder().set_topics("t").build()
    with pytest.raises(ConfigurationError, match="No subscribe mode is specified"):
        _source_builder().build()
    with pytest.raises(ConfigurationError, match="Deserialization schema is required"):
        KafkaSource.builder().set_bootstrap_servers("x:1").set_topics("t").build()


def test_source_subscribes_one_way_only() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"Cannot use topic pattern for consumption because a TopicListSubscriber is "
        r"already set for consumption\.",
    ):
        _source_builder().set_topics("a").set_topic_pattern("b.*")
    with pytest.raises(ConfigurationError, match="PartitionSetSubscriber"):
        _source_builder().set_partitions({KafkaTopicPartition("a", 0)}).set_topics("a")


def test_committed_offsets_need_a_group() -> None:
    builder = _source_builder().set_topics("t")
    builder.set_starting_offsets(KafkaOffsetsInitializer.committed_offsets())
    with pytest.raises(ConfigurationError, match=r"Property group\.id is required"):
        builder.build()
    assert builder.set_group_id("g").build().properties["group.id"] == "g"


def test_bounded_and_unbounded() -> None:
    bounded = _source_builder().set_topics("t").set_bounded(KafkaOffsetsInitializer.latest())
    assert bounded.build().get_boundedness() == "BOUNDED"
    unbounded = _source_builder().set_topics("t").set_unbounded(KafkaOffsetsInitializer.latest())
    assert unbounded.build().get_boundedness() == "CONTINUOUS_UNBOUNDED"
    assert _source_builder().set_topics("t").build().get_boundedness() == "CONTINUOUS_UNBOUNDED"


def test_offsets_initializers() -> None:
    tp = KafkaTopicPartition("t", 1)
    assert tp == KafkaTopicPartition("t", 1) and hash(tp) == hash(KafkaTopicPartition("t", 1))
    given = KafkaOffsetsInitializer.offsets({tp: 5})
    assert given.kind == "offsets" and given.reset is KafkaOffsetResetStrategy.EARLIEST
    assert KafkaOffsetsInitializer.timestamp(123).timestamp_ms == 123
    committed = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST)
    assert committed.reset is KafkaOffsetResetStrategy.LATEST


def test_record_serializer_validation() -> None:
    builder = KafkaRecordSerializationSchema.builder()
    with pytest.raises(ConfigurationError, match=r"No value serializer is configured\."):
        builder.set_topic("t").build()
    builder = KafkaRecordSerializationSchema.builder().set_value_serialization_schema(
        SimpleStringSchema()
    )
    with pytest.raises(ConfigurationError, match=r"No topic selector is configured\."):
        builder.build()
    with pytest.raises(TypeError, match="topic_selector must be KafkaTopicSelector or a callable"):
        builder.set_topic_selector("not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"Value serializer already set\."):
        builder.set_value_serialization_schema(SimpleStringSchema())


def test_record_serializer_topics_keys_values() -> None:
    class ByParity(KafkaTopicSelector):
        def apply(self, data: object) -> str:
            return "even" if int(str(data)) % 2 == 0 else "odd"

    schema = (
        KafkaRecordSerializationSchema.builder()
        .set_topic_selector(ByParity())
        .set_key_serialization_schema(SimpleStringSchema())
        .set_value_serialization_schema(SimpleStringSchema())
        .build()
    )
    assert schema.serialize_batch([1, 2]) == [("odd", b"1", b"1"), ("even", b"2", b"2")]
    by_function = (
        KafkaRecordSerializationSchema.builder()
        .set_topic_selector(lambda v: f"t-{v}")
        .set_value_serialization_schema(SimpleStringSchema())
        .build()
    )
    assert by_function.serialize_batch(["a"]) == [("t-a", None, b"a")]


def test_sink_validation_and_defaults() -> None:
    serializer = (
        KafkaRecordSerializationSchema.builder()
        .set_topic("t")
        .set_value_serialization_schema(SimpleStringSchema())
        .build()
    )
    with pytest.raises(ConfigurationError, match="bootstrapServers"):
        KafkaSink.builder().set_record_serializer(serializer).build()
    with pytest.raises(ConfigurationError, match="recordSerializer"):
        KafkaSink.builder().set_bootstrap_servers("x:1").build()
    with pytest.raises(ConfigurationError, match="The configured prefix is too long"):
        KafkaSink.builder().set_transactional_id_prefix("p" * 6401)
    sink = KafkaSink.builder().set_bootstrap_servers("x:1").set_record_serializer(serializer)
    built = sink.build()
    assert built.delivery_guarantee is DeliveryGuarantee.NONE and not built.transactional
    assert built.transactional_id_prefix == "kafka-sink"
    sink.set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
    with pytest.raises(ConfigurationError) as missing:
        sink.build()
    assert str(missing.value) == (
        "EXACTLY_ONCE delivery guarantee requires a transactionIdPrefix to be set to provide "
        "unique transaction names across multiple KafkaSinks writing to the same Kafka cluster."
    )
    exactly = sink.set_transactional_id_prefix("orders-job").build()
    assert exactly.transactional and exactly.transactional_id_prefix == "orders-job"
    assert exactly.producer_config()["partitioner"] == "murmur2_random"


def test_simple_string_schema() -> None:
    schema = SimpleStringSchema()
    assert schema.deserialize_batch([b"a", "é".encode()]) == ["a", "é"]
    assert SimpleStringSchema("latin-1").serialize("é") == b"\xe9"
    with pytest.raises(LookupError):
        SimpleStringSchema("no-such-charset")


# Public methods of PyFlink 2.3's pyflink/datastream/connectors/kafka.py (hard-coded from it).
PYFLINK_METHODS = {
    "KafkaSourceBuilder": {
        "build",
        "set_bootstrap_servers",
        "set_group_id",
        "set_topics",
        "set_topic_pattern",
        "set_partitions",
        "set_starting_offsets",
        "set_unbounded",
        "set_bounded",
        "set_value_only_deserializer",
        "set_client_id_prefix",
        "set_property",
        "set_properties",
    },
    "KafkaOffsetsInitializer": {"committed_offsets", "timestamp", "earliest", "latest", "offsets"},
    "KafkaSinkBuilder": {
        "build",
        "set_bootstrap_servers",
        "set_delivery_guarantee",
        "set_transactional_id_prefix",
        "set_record_serializer",
        "set_property",
    },
    "KafkaRecordSerializationSchemaBuilder": {
        "build",
        "set_topic",
        "set_topic_selector",
        "set_key_serialization_schema",
        "set_value_serialization_schema",
    },
}


@pytest.mark.parametrize("name", sorted(PYFLINK_METHODS))
def test_pyflink_methods_exist(name: str) -> None:
    import sparkpoint.datastream.connectors.kafka as kafka

    cls = getattr(kafka, name, None)
    if cls is None:  # the builders are reached through their classes' builder()
        cls = type(getattr(kafka, name.removesuffix("Builder")).builder())
    missing = {m for m in PYFLINK_METHODS[name] if not callable(getattr(cls, m, None))}
    assert missing == set()


@pytest.mark.parametrize(
    ("props", "idempotent"),
    [
        ({}, True),
        ({"acks": "all"}, True),
        ({"acks": "-1", "retries": "3", "max.in.flight.requests.per.connection": "5"}, True),
        ({"acks": "1"}, None),
        ({"request.required.acks": "0"}, None),
        ({"retries": "0"}, None),
        ({"max.in.flight.requests.per.connection": "6"}, None),
        ({"enable.idempotence": "false"}, "false"),
        ({"enable.idempotence": "true"}, "true"),
    ],
)
@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.NONE])
def test_sink_producer_idempotent_as_javas(
    props: dict[str, str], idempotent: object, guarantee: DeliveryGuarantee
) -> None:
    """Java's producer is idempotent unless idempotence is set or a property rules it out
    (then it is off, silently); librdkafka's default is off, so the sink sets it as Java's
    would be. librdkafka accepts every configuration that results."""
    from confluent_kafka import Producer

    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:9")
        .set_delivery_guarantee(guarantee)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic("t")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
    )
    for key, value in props.items():
        builder.set_property(key, value)
    conf = builder.build().producer_config()
    assert conf.get("enable.idempotence") == idempotent
    Producer(conf).flush(0)
