"""The Kafka connector's tests run against the real broker of ``tests.fixtures.kafka`` and
the runtime tests' local SparkSession (through ``tests/connectors/conftest.py``)."""

from tests.fixtures.kafka import kafka_broker

__all__ = ["kafka_broker"]
