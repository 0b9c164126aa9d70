"""The task side of ``KafkaSink``: one writer per subtask and epoch, per delivery guarantee.

NONE and AT_LEAST_ONCE share one producer per configuration and Python worker. EXACTLY_ONCE
writes the epoch in one Kafka transaction, flushed and left open at the epoch's end for the
driver to commit; its transactional id follows the sink's ``TransactionNamingStrategy``.
INCREMENTING (the default) gives every transaction an id never used before,
``<prefix>-<worker>-<n>``, with a producer this Python worker made ready in the background
(``kafka_producers``). POOLING names transactions ``<prefix>-<subtask>-<n>`` with the lowest
``n`` whose transaction has ended, and keeps one producer per transactional id in the
Python worker, as Flink's producer pool. A reused producer keeps its producer id and epoch,
so a POOLING committable also carries its transaction's start time (``DescribeTransactions``
at the epoch's end): the driver ends a transaction only while it is still the current one on
its id (``kafka_transactions``), and a redone commit after a restore leaves a newer one
alone. An INCREMENTING id has one transaction only: its committable carries the producer id
and epoch read when the producer was made ready, and no start time.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.connectors.kafka_producers import (
    DeliveryErrors,
    delivery_errors_only,
    init_producer,
    prepare_producers,
    take_producer,
)
from sparkpoint.connectors.kafka_readers import ClientLog
from sparkpoint.connectors.kafka_transactions import BUSY_STATES, OpenTransaction, TransactionAdmin
from sparkpoint.connectors.sink import SinkWriter

__all__ = ["PlainWriter", "TransactionNamingStrategy", "TransactionalWriter"]

# One producer per configuration and Python worker for NONE/AT_LEAST_ONCE: NONE's records are
# still being sent when the epoch's task returns.
_PRODUCERS: dict[tuple[tuple[str, Any], ...], Any] = {}


class TransactionNamingStrategy(enum.Enum):
    """Flink's names for how EXACTLY_ONCE names its transactions: POOLING reuses ids (and
    their producers), INCREMENTING takes a new id for every transaction."""

    INCREMENTING = 0
    POOLING = 1


@dataclass
class _Pooled:
    """A transactional producer kept in the worker, and the producer id and epoch its last
    transaction had (how the writer tells that nobody fenced it since)."""

    producer: Any
    errors: DeliveryErrors
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_start_time_ms: int = -1
    topics: set[str] = field(default_factory=set)


# Transactional id -> its producer, in this Python worker (POOLING).
_POOL: dict[str, _Pooled] = {}
# Pool statistics of this worker: producers created and reused (read by the tests).
POOL_STATS = {"created": 0, "reused": 0}


def _produce_all(producer: Any, rows: list[tuple[str, bytes | None, bytes]]) -> None:
    produce = producer.produce
    for topic, key, value in rows:
        while True:
            try:
                produce(topic, value, key)
                break
            except BufferError:  # the local queue is full: let librdkafka send
                producer.poll(0.05)
    producer.poll(0)


def _flush(producer: Any, errors: DeliveryErrors) -> None:
    remaining = producer.flush(300)
    if remaining:
        raise RuntimeError(f"{remaining} Kafka records unacknowledged after 300 s")
    errors.check()


class PlainWriter(SinkWriter):
    """NONE (``wait`` false: nothing waited for) and AT_LEAST_ONCE (flushed at the epoch's
    end, so the epoch succeeds only once Kafka acknowledged every record)."""

    def __init__(self, config: dict[str, Any], serializer: Any, wait: bool) -> None:
        self.serializer = serializer
        self.wait = wait
        key = tuple(sorted(config.items()))
        if key not in _PRODUCERS:
            from confluent_kafka import Producer

            errors = DeliveryErrors()
            # Pooled for the worker's life: at most one log line a minute (``ClientLog``).
            producer = Producer({**config, **delivery_errors_only(errors), "logger": ClientLog()})
            _PRODUCERS[key] = (producer, errors)
        self.producer, self.errors = _PRODUCERS[key]

    def write(self, values: list[Any]) -> None:
        _produce_all(self.producer, self.serializer.serialize_batch(values))

    def prepare_commit(self) -> list[Any]:
        if self.wait:
            _flush(self.producer, self.errors)
        return []


class TransactionalWriter(SinkWriter):
    """EXACTLY_ONCE: the epoch's records in one transaction, left open for the driver; its
    committable is the transactional id, producer id and epoch, and the topics written.
    Its flush (round trips to the brokers) runs while the task snapshots its state."""

    prepare_in_background = True

    def __init__(
        self,
        config: dict[str, Any],
        serializer: Any,
        prefix: str,
        subtask: int,
        epoch: int,
        naming: TransactionNamingStrategy,
        properties: dict[str, str],
    ) -> None:
        self.config = config
        self.serializer = serializer
        self.prefix = prefix
        self.subtask = subtask
        self.epoch = epoch
        self.naming = naming
        self.admin = TransactionAdmin.shared(properties)
        self.txn: _Pooled | None = None
        self.transactional_id = ""

    def write(self, values: list[Any]) -> None:
        if not values:
            return  # no transaction for nothing: an empty one could not be committed
        # Serialized before the transaction begins: a POOLING id a new producer initialised
        # has no transaction start time until its first record, and a restore's redone commit
        # of an older committable on the id refuses that state (see ``kafka_sink``).
        rows = self.serializer.serialize_batch(values)
        if self.txn is None:
            self.txn = self._begin()
        self.txn.topics.update(topic for topic, _k, _v in rows)
        _produce_all(self.txn.producer, rows)

    def _begin(self) -> _Pooled:
        if self.naming is TransactionNamingStrategy.INCREMENTING:
            ready = take_producer(self.prefix, self.config, self.admin)
            self.transactional_id = ready.transactional_id
            return _Pooled(ready.producer, ready.errors, ready.producer_id, ready.producer_epoch)
        for n in itertools.count():
            tid = f"{self.prefix}-{self.subtask}-{n}"
            now = self.admin.describe_or_none(tid)
            if now is None or now.state not in BUSY_STATES:
                self.transactional_id = tid
                return self._reuse(tid, now) or self._new_producer(tid)
        raise AssertionError("unreachable")

    def _reuse(self, tid: str, now: OpenTransaction | None) -> _Pooled | None:
        """The pooled producer of ``tid`` in a new transaction, if its last one ended and
        nobody fenced it since; librdkafka still counts that transaction as its current
        one, so it ends it again (a no-op on the broker: same producer epoch)."""
        from confluent_kafka import KafkaException

        pooled = _POOL.pop(tid, None)
        if pooled is None or now is None:
            return None
        if (now.producer_id, now.producer_epoch) != (pooled.producer_id, pooled.producer_epoch):
            return None  # fenced by another producer of the id: a new one takes over
        try:
            if now.state == "CompleteCommit":
                pooled.producer.commit_transaction(30)
            elif now.state == "CompleteAbort":
                pooled.producer.abort_transaction(30)
            else:
                return None
            pooled.producer.begin_transaction()
        except KafkaException:
            return None
        pooled.errors.error = None
        pooled.topics = set()
        POOL_STATS["reused"] += 1
        return pooled

    def _new_producer(self, tid: str) -> _Pooled:
        errors = DeliveryErrors()
        producer = init_producer(self.config, tid, errors)  # fences what an earlier one left
        producer.begin_transaction()
        POOL_STATS["created"] += 1
        return _Pooled(producer, errors)

    def prepare_commit(self) -> list[Any]:
        if self.txn is None:
            return []
        _flush(self.txn.producer, self.txn.errors)
        # The transaction stays open: the driver commits it with the checkpoint.
        if self.naming is TransactionNamingStrategy.INCREMENTING:
            prepare_producers(self.prefix, self.config, self.admin)
            return [self._committable(self.txn.producer_id, self.txn.producer_epoch, -1)]
        now = self.admin.describe(self.transactional_id)
        if now.state != "Ongoing":
            raise RuntimeError(
                f"Kafka transaction {self.transactional_id} is {now.state} before its commit "
                "(fenced by a newer producer of its id)"
            )
        if 0 <= now.transaction_start_time_ms == self.txn.transaction_start_time_ms:
            # A reused producer's transaction that began in the same millisecond as its last
            # one: the start times could not tell them apart, so this one is not handed on.
            raise RuntimeError(
                f"Kafka transaction {self.transactional_id} began at "
                f"{now.transaction_start_time_ms} ms, as its id's previous one did"
            )
        self.txn.producer_id, self.txn.producer_epoch = now.producer_id, now.producer_epoch
        self.txn.transaction_start_time_ms = now.transaction_start_time_ms
        _POOL[self.transactional_id] = self.txn
        return [
            self._committable(now.producer_id, now.producer_epoch, now.transaction_start_time_ms)
        ]

    def _committable(self, producer_id: int, producer_epoch: int, start_ms: int) -> Any:
        assert self.txn is not None
        return {
            "transactional_id": self.transactional_id,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "topics": sorted(self.txn.topics),
            "transaction_start_time_ms": start_ms,
        }
