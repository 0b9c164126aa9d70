"""``pyflink.datastream.formats.avro``: ``AvroRowSerializationSchema`` and
``AvroRowDeserializationSchema`` from an Avro schema string (the ``avro`` extra: fastavro)."""

from sparkpoint.connectors.avro_row_schemas import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
)

__all__ = ["AvroRowDeserializationSchema", "AvroRowSerializationSchema"]
