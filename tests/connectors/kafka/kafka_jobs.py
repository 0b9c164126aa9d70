"""A Kafka → key_by/reduce → Kafka job for the connector's tests, and its exact output.

Record ``x`` of the input is ``"<x % KEYS>,<x>"`` in partition ``x % PARTITIONS``; KEYS is a
multiple of PARTITIONS, so each key lives in one partition and its running sums come in
offset order: the output is deterministic, every line expected exactly once.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from sparkpoint.common import SimpleStringSchema, WatermarkStrategy
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from sparkpoint.testing import FailureInjector

PARTITIONS = 4
KEYS = 8


def produce_input(bootstrap: str, topic: str, n: int) -> None:
    """Write the job's input: ``n`` records over ``PARTITIONS`` partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    for x in range(n):
        producer.produce(topic, f"{x % KEYS},{x}".encode(), partition=x % PARTITIONS)
        if x % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def expected_output(n: int) -> collections.Counter[str]:
    """Every ``"key,running sum"`` line the job must write, once each."""
    sums: dict[int, int] = collections.defaultdict(int)
    out: collections.Counter[str] = collections.Counter()
    for x in range(n):
        sums[x % KEYS] += x
        out[f"{x % KEYS},{sums[x % KEYS]}"] += 1
    return out


class Parse:
    """``"k,x"`` → ``(k, x)``, failing where the injector says."""

    def __init__(self, injector: FailureInjector | None) -> None:
        self.injector = injector

    def __call__(self, line: str) -> tuple[int, int]:
        k, x = line.split(",")
        if self.injector is not None:
            self.injector.maybe_fail(int(x))
        return int(k), int(x)


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0], a[1] + b[1]


def _format(kv: tuple[int, int]) -> str:
    return f"{kv[0]},{kv[1]}"


def kafka_sum_job(
    env: Any,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    prefix: str,
    injector: FailureInjector | None = None,
) -> None:
    """Bounded KafkaSource → parse → key_by → reduce → KafkaSink EXACTLY_ONCE."""
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(source_topic)
        .set_group_id(f"{prefix}-group")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(sink_topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(prefix)
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
        .uid("source")
        .map(Parse(injector))
        .key_by(lambda kv: kv[0])
        .reduce(_add)
        .uid("sum")
        .map(_format)
        .sink_to(sink)
        .uid("sink")
    )


def read_committed(bootstrap: str, topic: str, timeout: float = 60.0) -> list[str]:
    """Everything a ``read_committed`` consumer reads of ``topic``, up to its end."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
        for p in partitions
    }
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out += [m.value().decode() for m in consumer.consume(10_000, 0.5) if m.error() is None]
        positions = consumer.position([TopicPartition(topic, p) for p in partitions])
        if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions):
            break
    consumer.close()
    return out
