"""Shared parts of the unbounded Kafka measurements (``bench/bench_kafka_idle.py`` and
``scripts/kafka_soak.py``): the Kafka → keyed count → Kafka EXACTLY_ONCE job, its exact
expected output, a steady producer, and CPU and memory of this driver's process tree.

Input record ``x`` is ``"<x % keys>,<x>"`` in partition ``x % partitions``; the job counts
records per key and writes ``"<key>,<count>"`` for every record, so the output holds
``"k,1" .. "k,n_k"`` once each for every key ``k`` read ``n_k`` times, in any order.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from sparkpoint.common import SimpleStringSchema, WatermarkStrategy
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)

__all__ = [
    "ProcessTree",
    "SteadyProducer",
    "TreeUsage",
    "expected_counts",
    "keyed_count_job",
    "produce",
    "read_committed",
]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _parse(line: str) -> tuple[str, int]:
    return line.split(",", 1)[0], 1


def _add(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    return a[0], a[1] + b[1]


def _format(kv: tuple[str, int]) -> str:
    return f"{kv[0]},{kv[1]}"


def keyed_count_job(
    env: Any,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    prefix: str,
    stop_at_latest: bool = False,
) -> None:
    """Unbounded KafkaSource (stopping at the latest offsets of its start with
    ``stop_at_latest``) → parse → key_by → count → KafkaSink EXACTLY_ONCE."""
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(source_topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )
    if stop_at_latest:
        builder.set_unbounded(KafkaOffsetsInitializer.latest())
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
        env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), "kafka")
        .uid("source")
        .map(_parse)
        .key_by(lambda kv: kv[0])
        .reduce(_add)
        .uid("count")
        .map(_format)
        .sink_to(sink)
        .uid("sink")
    )


def expected_counts(n: int, keys: int) -> collections.Counter[str]:
    """The job's exact output after reading records ``0 .. n-1``."""
    out: collections.Counter[str] = collections.Counter()
    for k in range(min(n, keys)):
        per_key = (n - k + keys - 1) // keys
        out.update(f"{k},{i}" for i in range(1, per_key + 1))
    return out


def read_committed(bootstrap: str, topic: str, timeout: float = 300.0) -> list[str]:
    """Every value a ``read_committed`` consumer reads of ``topic``, up to its end."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka-unbounded-checker",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = consumer.consume(50_000, 0.5)
            out += [m.value().decode() for m in batch if m.error() is None]
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions):
                return out
        raise RuntimeError(f"read_committed of {topic} did not reach its end in {timeout} s")
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, xs: range, partitions: int, keys: int) -> None:
    """Write records ``xs`` at once (the job's input format)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for x in xs:
        producer.produce(topic, f"{x % keys},{x}".encode(), partition=x % partitions)
        if x % 10_000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("the producer could not deliver every record")


class SteadyProducer:
    """Produces ``rate`` records per second (in 100 ms batches, idempotent, so every
    partition holds its records once and in order) on a thread until ``stop()``."""

    def __init__(self, bootstrap: str, topic: str, rate: int, partitions: int, keys: int) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0}
        )
        self._topic, self._rate, self._partitions, self._keys = topic, rate, partitions, keys
        self.produced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def start(self) -> None:
        """Start producing."""
        self._thread.start()

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self._rate)
            for x in range(self.produced, due):
                key, part = x % self._keys, x % self._partitions
                self._producer.produce(self._topic, f"{key},{x}".encode(), partition=part)
            self.produced = max(self.produced, due)
            self._producer.poll(0)
            time.sleep(0.1)

    def stop(self) -> int:
        """Stop, flush, and return how many records were produced."""
        self._stop.set()
        self._thread.join()
        if self._producer.flush(60) != 0:
            raise RuntimeError("the producer could not deliver every record")
        return self.produced


@dataclass(frozen=True)
class TreeUsage:
    """CPU seconds (live processes plus their reaped children) and resident memory of a
    process tree, by role: the driver's Python process, the JVM, the Python workers."""

    cpu_s: float
    driver_rss: int
    jvm_rss: int
    workers_rss: int


class ProcessTree:
    """This process and its descendants, read from ``/proc`` (Linux), leaving out the
    subtrees of ``exclude`` (a Kafka broker started from here)."""

    def __init__(self, exclude: tuple[int, ...] = ()) -> None:
        self.root = os.getpid()
        self.exclude = set(exclude)

    def usage(self) -> TreeUsage:
        """CPU and memory of the tree now."""
        stats, tree = self._read()
        cpu = driver = jvm = workers = 0.0
        for pid in tree:
            _ppid, comm, seconds, rss = stats[pid]
            cpu += seconds
            if pid == self.root:
                driver += rss
            elif comm == "java":
                jvm += rss
            else:
                workers += rss
        return TreeUsage(cpu, int(driver), int(jvm), int(workers))

    def cpu_by_pid(self) -> dict[int, float]:
        """CPU seconds of every process of the tree now (its reaped children's included)."""
        stats, tree = self._read()
        return {pid: stats[pid][2] for pid in tree}

    def java_pids(self) -> list[int]:
        """The JVMs in the tree (Spark's driver JVM, executors)."""
        stats, tree = self._read()
        return sorted(pid for pid in tree if stats[pid][1] == "java")

    def _read(self) -> tuple[dict[int, tuple[int, str, float, int]], set[int]]:
        """Every process's (ppid, name, CPU seconds, RSS), and the tree's live pids."""
        stats: dict[int, tuple[int, str, float, int]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            comm = raw[raw.index("(") + 1 : raw.rindex(")")]
            fields = raw[raw.rindex(")") + 2 :].split()
            ppid = int(fields[1])
            ticks = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
            stats[int(name)] = (ppid, comm, ticks / _CLOCK_TICKS, int(fields[21]) * _PAGE)
        tree = {self.root}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, *_rest) in stats.items():
                if ppid in tree and pid not in tree and pid not in self.exclude:
                    tree.add(pid)
                    grew = True
        return stats, tree & stats.keys()
