"""Transactional Kafka producers made ready ahead of use in each Python worker, for the
exactly-once sink's INCREMENTING naming.

Every transaction gets a transactional id no transaction had before, ``<prefix>-<worker>-<n>``
(``worker`` random per Python process, ``n`` counting), so a committable's id, producer id and
epoch name exactly one transaction whatever happens later. A new producer must connect and
initialise its id (``InitProducerId``) before its first record: ~0.3 s measured on a local
broker, on the critical path of every epoch's sink. So when a writer takes a producer, the
next two are created and initialised in background threads once the epoch's records are
flushed (two, so that epochs shorter than an initialisation do not wait); the next writers
in this worker, of whatever subtask, take them ready (in Python workers that Spark reuses,
``spark.python.worker.reuse``, sparkpoint's default). A producer's id and epoch are read then
too (``DescribeTransactions``): they do not change while its id has one transaction, so the
epoch's end need not ask for them.
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
from sparkpoint.connectors.kafka_transactions import TransactionAdmin

__all__ = [
    "STATS",
    "DeliveryErrors",
    "ReadyProducer",
    "delivery_errors_only",
    "init_producer",
    "prepare_producers",
    "take_producer",
]

_INIT_TIMEOUT_S = 60
_AHEAD = 2  # producers made ready ahead per sink and Python worker
# Producers this process created ready ahead and took (read by the tests and benchmarks):
# "prepared" made in the background, "taken_ready" used that way, "created" made by the
# writer itself (none was ready, or the ready one failed).
STATS = {"prepared": 0, "taken_ready": 0, "created": 0}


def delivery_errors_only(errors: DeliveryErrors) -> dict[str, Any]:
    """A producer's settings that hand ``errors`` its failed records only: librdkafka calls
    no Python callback for a delivered one (one per record held the GIL in every flush)."""
    return {"on_delivery": errors, "delivery.report.only.error": True}


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
    """A transactional producer whose id is initialised, with no transaction begun, and
    the producer id and epoch its coordinator gave it."""

    transactional_id: str
    producer: Any
    errors: DeliveryErrors
    producer_id: int
    producer_epoch: int


class _Slot:
    """Producers made ready ahead for one sink (prefix and configuration): up to
    ``_AHEAD`` ready or being made, so epochs shorter than a producer's initialisation
    (``InitProducerId`` and the describe: ~0.1-0.3 s) do not wait for one."""

    def __init__(self, prefix: str, config: dict[str, Any], admin: TransactionAdmin) -> None:
        self.prefix = prefix
        self.config = config
        self.admin = admin
        self._cond = threading.Condition()
        self._ready: list[ReadyProducer] = []
        self._making = 0

    def collect(self) -> ReadyProducer | None:
        """The oldest producer made ready (waiting for one being made when none is); None
        if none was started or making them failed."""
        with self._cond:
            while not self._ready and self._making:
                self._cond.wait()
            return self._ready.pop(0) if self._ready else None

    def prepare_ahead(self) -> None:
        """Start making producers ready in the background, up to ``_AHEAD``."""
        with self._cond:
            missing = max(0, _AHEAD - len(self._ready) - self._making)
            self._making += missing
        for _ in range(missing):
            threading.Thread(target=self._make, name="sparkpoint-kafka-ready", daemon=True).start()

    def _make(self) -> None:
        try:
            ready: ReadyProducer | None = _new_producer(self.prefix, self.config, self.admin)
        except Exception:  # the writer that wants one creates it itself (and fails loudly)
            ready = None
        with self._cond:
            self._making -= 1
            if ready is not None:
                self._ready.append(ready)
                STATS["prepared"] += 1
            self._cond.notify_all()


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


def _new_producer(prefix: str, config: dict[str, Any], admin: TransactionAdmin) -> ReadyProducer:
    tid = _next_id(prefix)
    errors = DeliveryErrors()
    producer = init_producer(config, tid, errors)
    now = admin.describe(tid)
    return ReadyProducer(tid, producer, errors, now.producer_id, now.producer_epoch)


def init_producer(config: dict[str, Any], transactional_id: str, errors: DeliveryErrors) -> Any:
    """A transactional producer with ``transactional_id`` initialised (what an earlier
    producer of the id left open is aborted); a refused principal raises
    ``KafkaAccessError`` naming the ACL."""
    from confluent_kafka import KafkaException, Producer

    # A pooled producer outlives its epoch: once its broker went away, librdkafka's log of
    # it reaches the logs at most once a minute (``ClientLog``).
    conf = {**config, "transactional.id": transactional_id, **delivery_errors_only(errors)}
    producer = Producer({**conf, "logger": ClientLog()})
    try:
        producer.init_transactions(_INIT_TIMEOUT_S)
    except KafkaException as e:
        refused = librdkafka_denied(e, "InitProducerId", transactional_id)
        if refused is not None:
            raise refused from e
        raise
    return producer


def _slot(prefix: str, config: dict[str, Any], admin: TransactionAdmin) -> _Slot:
    key = (prefix, tuple(sorted((k, str(v)) for k, v in config.items())))
    slot = _SLOTS.get(key)
    if slot is None:
        slot = _SLOTS[key] = _Slot(prefix, config, admin)
    return slot


def take_producer(prefix: str, config: dict[str, Any], admin: TransactionAdmin) -> ReadyProducer:
    """A producer with a fresh transactional id and a transaction begun: one made ready in
    this worker if there is one, else a new one."""
    from confluent_kafka import KafkaException

    taken = _slot(prefix, config, admin).collect()
    if taken is not None:
        try:
            taken.producer.begin_transaction()
            STATS["taken_ready"] += 1
        except KafkaException:  # fenced or expired while it waited: not worth a failed task
            taken = None
    if taken is None:
        taken = _new_producer(prefix, config, admin)
        taken.producer.begin_transaction()
        STATS["created"] += 1
    return taken


def prepare_producers(prefix: str, config: dict[str, Any], admin: TransactionAdmin) -> None:
    """Make this worker's next producers ready in the background. Called once an epoch's
    records are flushed, so that making them (``Producer()``, the describe: Python work)
    does not take the GIL from the epoch's own work."""
    if os.environ.get("SPARK_REUSE_WORKER"):
        # Only a Python worker that Spark reuses outlives its task; elsewhere a producer
        # made ready now would be thrown away unused.
        _slot(prefix, config, admin).prepare_ahead()
