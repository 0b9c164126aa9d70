"""How a record becomes a Kafka record (topic, key, value): PyFlink's
``KafkaRecordSerializationSchema``, its builder and ``KafkaTopicSelector``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from sparkpoint.connectors.serialization_schemas import SerializationSchema
from sparkpoint.errors import ConfigurationError

__all__ = [
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaTopicSelector",
]


class KafkaTopicSelector(ABC):
    """Chooses the topic of each record (abstract, as PyFlink's)."""

    @abstractmethod
    def apply(self, data: Any) -> str:
        """The topic ``data`` goes to."""


class _FunctionTopicSelector(KafkaTopicSelector):
    def __init__(self, f: Callable[[Any], str]) -> None:
        self.f = f

    def apply(self, data: Any) -> str:
        return self.f(data)


class KafkaRecordSerializationSchema:
    """How a record becomes a Kafka record: its topic, key and value."""

    def __init__(
        self,
        topic: str | None,
        topic_selector: KafkaTopicSelector | None,
        key_schema: SerializationSchema | None,
        value_schema: SerializationSchema,
    ) -> None:
        self.topic = topic
        self.topic_selector = topic_selector
        self.key_schema = key_schema
        self.value_schema = value_schema

    @staticmethod
    def builder() -> KafkaRecordSerializationSchemaBuilder:
        """A builder: a topic (or selector) and a value schema are required."""
        return KafkaRecordSerializationSchemaBuilder()

    def serialize_batch(self, values: list[Any]) -> list[tuple[str, bytes | None, bytes]]:
        """``(topic, key, value)`` of each record."""
        payloads = self.value_schema.serialize_batch(values)
        keys: list[bytes | None] = (
            list(self.key_schema.serialize_batch(values))
            if self.key_schema is not None
            else [None] * len(values)
        )
        if self.topic_selector is not None:
            select = self.topic_selector.apply
            topics = [select(v) for v in values]
        else:
            topics = [str(self.topic)] * len(values)
        return list(zip(topics, keys, payloads))


class KafkaRecordSerializationSchemaBuilder:
    """PyFlink's ``KafkaRecordSerializationSchemaBuilder``."""

    def __init__(self) -> None:
        self._topic: str | None = None
        self._topic_selector: KafkaTopicSelector | None = None
        self._key: SerializationSchema | None = None
        self._value: SerializationSchema | None = None

    def build(self) -> KafkaRecordSerializationSchema:
        """The schema; fails as Flink's builder does without a value schema or topic."""
        if self._value is None:
            raise ConfigurationError("No value serializer is configured.")
        if self._topic is None and self._topic_selector is None:
            raise ConfigurationError("No topic selector is configured.")
        return KafkaRecordSerializationSchema(
            self._topic, self._topic_selector, self._key, self._value
        )

    def set_topic(self, topic: str) -> KafkaRecordSerializationSchemaBuilder:
        """One topic for every record."""
        if self._topic_selector is not None:
            raise ConfigurationError("Topic selector already set.")
        self._topic = topic
        return self

    def set_topic_selector(
        self, topic_selector: Callable[[Any], str] | KafkaTopicSelector
    ) -> KafkaRecordSerializationSchemaBuilder:
        """A topic per record, from a ``KafkaTopicSelector`` or a function."""
        if not isinstance(topic_selector, KafkaTopicSelector) and not callable(topic_selector):
            raise TypeError("topic_selector must be KafkaTopicSelector or a callable")
        if self._topic is not None:
            raise ConfigurationError("Topic selector already set.")
        if not isinstance(topic_selector, KafkaTopicSelector):
            topic_selector = _FunctionTopicSelector(topic_selector)
        self._topic_selector = topic_selector
        return self

    def set_key_serialization_schema(
        self, key_serialization_schema: SerializationSchema
    ) -> KafkaRecordSerializationSchemaBuilder:
        """The record's key (none by default)."""
        if self._key is not None:
            raise ConfigurationError("Key serializer already set.")
        self._key = key_serialization_schema
        return self

    def set_value_serialization_schema(
        self, value_serialization_schema: SerializationSchema
    ) -> KafkaRecordSerializationSchemaBuilder:
        """The record's value (required)."""
        if self._value is not None:
            raise ConfigurationError("Value serializer already set.")
        self._value = value_serialization_schema
        return self
