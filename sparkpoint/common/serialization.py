"""``pyflink.common.serialization``: encoders for row-format file sinks and the
(de)serialization schemas of byte-oriented connectors (Kafka)."""

from sparkpoint.connectors.file_sink import Encoder
from sparkpoint.connectors.serialization_schemas import (
    ByteArraySchema,
    DeserializationSchema,
    SerializationSchema,
    SimpleStringSchema,
)

__all__ = [
    "ByteArraySchema",
    "DeserializationSchema",
    "Encoder",
    "SerializationSchema",
    "SimpleStringSchema",
]
