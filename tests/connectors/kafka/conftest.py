"""The Kafka connector's tests run against the real broker of ``tests.fixtures.kafka`` and
the runtime tests' local SparkSession (through ``tests/connectors/conftest.py``); the
secured broker (``tests.fixtures.kafka_secured``) serves this package's modules that ask
for it (registered here once, so that one broker serves them all)."""

from tests.fixtures.kafka import kafka_broker
from tests.fixtures.kafka_secured import secured_kafka_broker

__all__ = ["kafka_broker", "secured_kafka_broker"]
