"""Record (de)serialization for byte-oriented connectors (Kafka): PyFlink's
``SerializationSchema``/``DeserializationSchema``, ``SimpleStringSchema`` and
``ByteArraySchema``, in Python and applied a batch at a time."""

from __future__ import annotations

from typing import Any

__all__ = ["ByteArraySchema", "DeserializationSchema", "SerializationSchema", "SimpleStringSchema"]


class SerializationSchema:
    """Turns a record into bytes (a Kafka key or value)."""

    def serialize(self, value: Any) -> bytes:
        """The bytes of one record."""
        raise NotImplementedError(f"{type(self).__name__} cannot serialize")

    def serialize_batch(self, values: list[Any]) -> list[bytes]:
        """The bytes of many records (one Python call per batch where the schema allows)."""
        return [self.serialize(v) for v in values]


class DeserializationSchema:
    """Turns bytes (a Kafka value) into a record."""

    def deserialize(self, message: bytes) -> Any:
        """The record of one message."""
        raise NotImplementedError(f"{type(self).__name__} cannot deserialize")

    def deserialize_batch(self, messages: list[bytes]) -> list[Any]:
        """The records of many messages."""
        return [self.deserialize(m) for m in messages]


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings as bytes in a charset (UTF-8 by default), as Flink's ``SimpleStringSchema``."""

    def __init__(self, charset: str = "UTF-8") -> None:
        "".encode(charset)  # an unknown charset fails here, as Java's Charset.forName does
        self.charset = charset

    def serialize(self, value: Any) -> bytes:
        return str(value).encode(self.charset)

    def serialize_batch(self, values: list[Any]) -> list[bytes]:
        charset = self.charset
        return [str(v).encode(charset) for v in values]

    def deserialize(self, message: bytes) -> str:
        return message.decode(self.charset)

    def deserialize_batch(self, messages: list[bytes]) -> list[Any]:
        charset = self.charset
        return [m.decode(charset) for m in messages]


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Bytes as they are."""

    def serialize(self, value: Any) -> bytes:
        return bytes(value)

    def deserialize(self, message: bytes) -> bytes:
        return message

    def deserialize_batch(self, messages: list[bytes]) -> list[Any]:
        return messages
