"""``pyflink.datastream.formats.json``: ``JsonRowDeserializationSchema`` and
``JsonRowSerializationSchema``, built with PyFlink's builders."""

from sparkpoint.connectors.json_row_schemas import (
    JsonRowDeserializationSchema,
    JsonRowSerializationSchema,
)

__all__ = ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"]
