"""``pyflink.datastream.connectors.kafka``: ``KafkaSource`` and ``KafkaSink`` with their
builders, offsets initializers and record serialization schema."""

from sparkpoint.connectors.delivery import DeliveryGuarantee
from sparkpoint.connectors.kafka_offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)
from sparkpoint.connectors.kafka_record_schema import (
    KafkaRecordSerializationSchema,
    KafkaRecordSerializationSchemaBuilder,
    KafkaTopicSelector,
)
from sparkpoint.connectors.kafka_sink import KafkaSink, KafkaSinkBuilder
from sparkpoint.connectors.kafka_source import KafkaSource, KafkaSourceBuilder
from sparkpoint.connectors.kafka_writers import TransactionNamingStrategy

__all__ = [
    "DeliveryGuarantee",
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaTopicPartition",
    "KafkaTopicSelector",
    "TransactionNamingStrategy",
]
