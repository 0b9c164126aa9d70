"""A Kafka → key_by/reduce → Kafka job for the connector's tests, and its exact output.

Record ``x`` of the input is ``"<x % KEYS>,<x>"`` in partition ``x % partitions``; KEYS is a
multiple of the partitions, so each key lives in one partition and its running sums come in
offset order: the output is deterministic, every line expected exactly once. ``job_env`` and
``check_exact`` are the tests' environment and their exactness check.
"""

from __future__ import annotations

import collections
import glob
import os
import time
from typing import Any

from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_metadata
from sparkpoint.common import (
    RestartStrategies,
    SimpleStringSchema,
    WatermarkStrategy,
)
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    TransactionNamingStrategy,
)
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.testing import FailureInjector
from tests.connectors.kafka.source_jobs import source_env
from tests.fixtures import kafka_tools
from tests.fixtures.kafka import KafkaBroker, ordered_producer

PARTITIONS = 4
KEYS = 8


def produce_input(bootstrap: str, topic: str, n: int, partitions: int = PARTITIONS) -> None:
    """Write the job's input: ``n`` records over ``partitions`` partitions."""
    producer = ordered_producer(bootstrap)
    for x in range(n):
        producer.produce(topic, f"{x % KEYS},{x}".encode(), partition=x % partitions)
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


def running_sum_at(x: int) -> int:
    """The running sum that record ``x`` makes for its key (unique within the output)."""
    return sum(range(x % KEYS, x + 1, KEYS))


class StallAt:
    """Sleeps ``seconds`` where ``maybe_fail`` sees one of ``records`` (a slow epoch for a
    fault to land in); usable wherever a ``FailureInjector`` is."""

    def __init__(self, records: set[int], seconds: float) -> None:
        self.records = records
        self.seconds = seconds

    def maybe_fail(self, record: int) -> None:
        """Sleep if ``record`` is one of the chosen."""
        if record in self.records:
            time.sleep(self.seconds)


class Format:
    """``(k, sum)`` → ``"k,sum"``, failing (in the sink's stage) where the injector says: at
    the running sum it is given."""

    def __init__(self, injector: FailureInjector | StallAt | None) -> None:
        self.injector = injector

    def __call__(self, kv: tuple[int, int]) -> str:
        if self.injector is not None:
            self.injector.maybe_fail(kv[1])
        return f"{kv[0]},{kv[1]}"


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0], a[1] + b[1]


def kafka_sum_job(
    env: Any,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    prefix: str,
    injector: FailureInjector | None = None,
    sink_injector: FailureInjector | StallAt | None = None,
    guarantee: DeliveryGuarantee = DeliveryGuarantee.EXACTLY_ONCE,
    naming: TransactionNamingStrategy = TransactionNamingStrategy.INCREMENTING,
    properties: dict[str, str] | None = None,
) -> KafkaSink:
    """Bounded KafkaSource → parse → key_by → reduce → KafkaSink (EXACTLY_ONCE unless told);
    ``injector`` fails in the source's stage (at a record), ``sink_injector`` in the sink's
    (at a sum). Returns the sink (the driver's: it counts the lingering transactions it
    aborted). ``properties`` go to both (security settings)."""
    source = (
        KafkaSource.builder()
        .set_properties(properties or {})
        .set_bootstrap_servers(bootstrap)
        .set_topics(source_topic)
        .set_group_id(f"{prefix}-group")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    sink_builder = KafkaSink.builder()
    for key, value in (properties or {}).items():
        sink_builder.set_property(key, value)
    sink = (
        sink_builder.set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(sink_topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(prefix)
        .set_transaction_naming_strategy(naming)
        .build()
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
        .uid("source")
        .map(Parse(injector))
        .key_by(lambda kv: kv[0])
        .reduce(_add)
        .uid("sum")
        .map(Format(sink_injector))
        .sink_to(sink)
        .uid("sink")
    )
    return sink


def read_committed(
    bootstrap: str, topic: str, timeout: float = 60.0, client: dict[str, str] | None = None
) -> list[str]:
    """Everything a ``read_committed`` consumer reads of ``topic``, up to its end (``client``:
    librdkafka's security settings, e.g. a secured broker's ``client_config()``)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **(client or {}),
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


def job_env(
    spark: Any,
    tmp_path: Any,
    per_split: int,
    restore: str | None = None,
    parallelism: int = 2,
    restarts: Any = None,
) -> Any:
    """``source_env``'s environment with a restart strategy (three restarts by default)."""
    env = source_env(spark, tmp_path, per_split, parallelism=parallelism, restore=restore)
    env.set_restart_strategy(restarts or RestartStrategies.fixed_delay_restart(3, 0))
    return env


def create_topics(
    broker: KafkaBroker, name: str, n: int, partitions: int = PARTITIONS
) -> tuple[str, str]:
    """The job's input topic (``n`` records) and its 2-partition output topic."""
    source, sink = f"{name}-in", f"{name}-out"
    broker.create_topic(source, partitions)
    broker.create_topic(sink, 2)
    produce_input(broker.bootstrap_servers, source, n, partitions)
    return source, sink


def check_exact(broker: KafkaBroker, sink: str, prefix: str, n: int) -> None:
    """A ``read_committed`` consumer reads every expected line exactly once, and no
    transaction with the job's prefix is open."""
    got = collections.Counter(read_committed(broker.bootstrap_servers, sink))
    expected = expected_output(n)
    lingering = open_transactions(broker, prefix, {sink: 2})
    missing, extra = expected - got, got - expected
    assert (sum(missing.values()), sum(extra.values()), lingering) == (0, 0, []), (
        f"{sum(got.values())} lines read; missing {sorted(missing)[:5]}..., "
        f"duplicated or unexpected {sorted(extra)[:5]}..., open transactions {lingering}"
    )
    assert got == expected


def open_transactions(
    broker: KafkaBroker, prefix: str, topics: dict[str, int] | None = None
) -> list[str]:
    """The open transactions of the job with transactional id prefix ``prefix``, and those
    open on the partitions of ``topics`` (name -> partitions), by Kafka's own
    ``kafka-transactions.sh`` (``tests/fixtures/kafka_tools.py``), not by the code under
    test."""
    return kafka_tools.open_transactions(broker.bootstrap_servers, prefix, topics or {})


def checkpoint_positions(ckpt: str, checkpoint_id: int) -> list[int]:
    """The source's partition positions (next offsets) in checkpoint ``checkpoint_id`` under
    ``ckpt``, in split order."""
    (path,) = glob.glob(os.path.join(glob.escape(ckpt), "*", f"chk-{checkpoint_id}", "_metadata"))
    with open(path, "rb") as f:
        metadata = load_checkpoint_metadata(f.read(), os.path.dirname(path), path)
    master = JobMasterState.from_metadata(metadata)
    assert master is not None
    splits = [s for per_source in master.sources.values() for s in per_source]
    return [int(s["position"]) for s in sorted(splits, key=lambda s: str(s["split_id"]))]


def latest_checkpoint(ckpt: str) -> str:
    """The directory of the newest completed checkpoint under ``ckpt``."""
    done = glob.glob(os.path.join(glob.escape(ckpt), "*", "chk-*", "_metadata"))
    return max((os.path.dirname(p) for p in done), key=lambda d: int(d.rsplit("-", 1)[1]))


class RestoredPositions:
    """Before every epoch, the newest completed checkpoint and its source positions (read
    from its ``_metadata``): after a failover, the checkpoint the job restored, before
    newer ones subsume it. Install with ``record_restored_positions``."""

    def __init__(self, ckpt: str) -> None:
        self.ckpt = ckpt
        self.at_epoch: dict[int, tuple[int, list[int]]] = {}

    def __call__(self, event: Any) -> None:
        done = glob.glob(os.path.join(glob.escape(self.ckpt), "*", "chk-*", "_metadata"))
        if event.epoch in self.at_epoch or not done:
            return
        checkpoint_id = int(latest_checkpoint(self.ckpt).rsplit("-", 1)[1])
        self.at_epoch[event.epoch] = (
            checkpoint_id,
            checkpoint_positions(self.ckpt, checkpoint_id),
        )


def record_restored_positions(env: Any, tmp_path: Any) -> RestoredPositions:
    """Install a ``RestoredPositions`` on the job of ``env`` (checkpoints under
    ``tmp_path/ckpt``)."""
    from sparkpoint.testing import Faults

    recorder = RestoredPositions(str(tmp_path / "ckpt"))
    env.set_fault_injection(Faults().on_epoch_start(recorder))
    return recorder


def check_restored_offsets(result: Any, positions: RestoredPositions) -> None:
    """The job failed over once, in its third epoch (250 records per split and epoch), to a
    checkpoint of an earlier epoch: the same whole number of epochs read of each of the 4
    partitions, fewer than the failed epoch's end."""
    (failover,) = result.failovers
    assert failover.epoch == 3 and failover.checkpoint_id is not None
    checkpoint_id, restored = positions.at_epoch[failover.epoch + 1]
    assert checkpoint_id == failover.checkpoint_id
    assert restored in ([250] * 4, [500] * 4)
