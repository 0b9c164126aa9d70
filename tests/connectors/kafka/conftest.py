"""The Kafka connector's tests run against the real broker of ``tests.fixtures.kafka`` and
the runtime tests' local SparkSession."""

from tests.fixtures.kafka import kafka_broker
from tests.runtime.conftest import env, spark

__all__ = ["env", "kafka_broker", "spark"]
