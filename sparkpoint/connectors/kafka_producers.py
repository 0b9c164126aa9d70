"""Transactional Kafka producers made ready ahead of use in each Python worker, for the
exactly-once sink's INCREMENTING naming.

Every transaction gets a transactional id no transaction had before, ``<prefix>-<worker>-<n>``
(``worker`` random per Python process, ``n`` counting), so a committable's id, producer id and
epoch name exactly one transaction whatever happens later. A new producer must connect and
initialise its id (``InitProducerId``) before its first record: ~0.3 s measured on a local
broker, on the critical path of every epoch's sink. So when a writer takes a producer, the
next one is created and initialised in a background thread while the epoch runs; the next
writer in this worker, of whatever subtask, takes it ready (in Python workers that Spark
reuses, ``spark.python.worker.reuse``, sparkpoint's default).
"""

from __future__ import annotations

import itertools
import os
import random
import threading
from dataclasses import dataclass
from typing import Any

from sparkpoint.connectors.kafka_access import librdkafka_denied
from sparkpoint.connectors.kafka_readers import ClientLog

__all__ = ["STATS", "DeliveryErrors", "ReadyProducer", "init_producer", "take_producer"]

_INIT_TIMEOUT_S = 60
# Producers this process created ready ahead and took (read by the tests and benchmarks):
# "prepared" made in the background, "taken_ready" used that way, "created" made by the
# writer itself (none was ready, or the ready one failed).
STATS = {"prepared": 0, "taken_ready": 0, "created": 0}


class DeliveryErrors:
    """Collects the first delivery error of a producer's records (and its topic)."""

    def __init__(self) -> None:
        self.error: Any = None
        self.topic = ""

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None and self.error is None:
            self.error = err
            self.topic = msg.topic() if msg is not None else ""

    def check(self) -> None:
        """Raise the first delivery error, if there was one (``KafkaAccessError`` naming the
        ACL when the principal may not write)."""
        if self.error is not None:
            refused = librdkafka_denied(self.error, "Produce", self.topic)
            if refused is not None:
                raise refused
            raise RuntimeError(f"Kafka refused a record: {self.error}")


@dataclass
class ReadyProducer:
    """A transactional producer whose id is initialised, with no transaction begun."""

    transactional_id: str
    producer: Any
    errors: DeliveryErrors


class _Slot:
    """The producer being made ready for one sink (prefix and configuration)."""

    def __init__(self, prefix: str, config: dict[str, Any]) -> None:
        self.prefix = prefix
        self.config = config
        self.thread: threading.Thread | None = None
        self.ready: ReadyProducer | None = None

    def collect(self) -> ReadyProducer | None:
        """The producer made ready (waiting for the one being made); None if none was
        started or making it failed."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        ready, self.ready = self.ready, None
        return ready

    def prepare_next(self) -> None:
        """Start making the next producer ready in the background."""

        def run() -> None:
            try:
                self.ready = _new_producer(self.prefix, self.config)
                STATS["prepared"] += 1
            except Exception:  # the writer that wants it creates one itself (and fails loudly)
                self.ready = None

        self.thread = threading.Thread(target=run, name="sparkpoint-kafka-ready", daemon=True)
        self.thread.start()


_SLOTS: dict[tuple[str, tuple[tuple[str, str], ...]], _Slot] = {}
_IDS: dict[int, tuple[int, Any]] = {}  # pid -> (random worker number, counter)


def _next_id(prefix: str) -> str:
    """``<prefix>-<worker>-<n>``: a worker number drawn per process (after any fork) from the
    OS's randomness, so two workers never share one."""
    pid = os.getpid()
    if pid not in _IDS:
        _IDS.clear()  # forked: the parent's numbers are not ours
        _IDS[pid] = (random.SystemRandom().getrandbits(62), itertools.count())
    worker, counter = _IDS[pid]
    return f"{prefix}-{worker}-{next(counter)}"


def _new_producer(prefix: str, config: dict[str, Any]) -> ReadyProducer:
    tid = _next_id(prefix)
    errors = DeliveryErrors()
    return ReadyProducer(tid, init_producer(config, tid, errors), errors)


def init_producer(config: dict[str, Any], transactional_id: str, errors: DeliveryErrors) -> Any:
    """A transactional producer with ``transactional_id`` initialised (what an earlier
    producer of the id left open is aborted); a refused principal raises
    ``KafkaAccessError`` naming the ACL."""
    from confluent_kafka import KafkaException, Producer

    # A pooled producer outlives its epoch: once its broker went away, librdkafka's log of
    # it reaches the logs at most once a minute (``ClientLog``).
    conf = {**config, "transactional.id": transactional_id, "on_delivery": errors}
    producer = Producer({**conf, "logger": ClientLog()})
    try:
        producer.init_transactions(_INIT_TIMEOUT_S)
    except KafkaException as e:
        refused = librdkafka_denied(e, "InitProducerId", transactional_id)
        if refused is not None:
            raise refused from e
        raise
    return producer


def take_producer(prefix: str, config: dict[str, Any]) -> ReadyProducer:
    """A producer with a fresh transactional id and a transaction begun: the one made ready
    in this worker if there is one, else a new one; the next is then made ready."""
    from confluent_kafka import KafkaException

    key = (prefix, tuple(sorted((k, str(v)) for k, v in config.items())))
    slot = _SLOTS.get(key)
    if slot is None:
        slot = _SLOTS[key] = _Slot(prefix, config)
    taken = slot.collect()
    if taken is not None:
        try:
            taken.producer.begin_transaction()
            STATS["taken_ready"] += 1
        except KafkaException:  # fenced or expired while it waited: not worth a failed task
            taken = None
    if taken is None:
        taken = _new_producer(prefix, config)
        taken.producer.begin_transaction()
        STATS["created"] += 1
    if os.environ.get("SPARK_REUSE_WORKER"):
        # Only a Python worker that Spark reuses outlives its task; elsewhere a producer
        # made ready now would be thrown away unused.
        slot.prepare_next()
    return taken
