"""``KafkaSink``: records to Kafka topics with Flink's delivery guarantees.

EXACTLY_ONCE is a two-phase commit on the sink contract: each subtask writes an epoch's records
in one Kafka transaction (transactional id ``<prefix>-<subtask>-<epoch>``), flushes it at the
epoch's end and hands the driver its producer id and epoch; the driver commits it when the
checkpoint covering the epoch completes, or aborts it on a rollback. A writer first fences the
transactions a failed attempt may have left open (its own subtask's ids from its epoch on, and
every id of a subtask beyond the parallelism), so no ``read_committed`` consumer is blocked.
AT_LEAST_ONCE flushes at every epoch's end; NONE does not wait.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sparkpoint.connectors.delivery import DeliveryGuarantee
from sparkpoint.connectors.kafka_record_schema import KafkaRecordSerializationSchema
from sparkpoint.connectors.kafka_transactions import OpenTransaction, TransactionAdmin
from sparkpoint.connectors.sink import Sink, SinkWriter
from sparkpoint.errors import ConfigurationError

__all__ = ["KafkaSink", "KafkaSinkBuilder"]

_MAX_PREFIX_BYTES = 6400
# One producer per configuration and Python worker for NONE/AT_LEAST_ONCE: NONE's records are
# still being sent when the epoch's task returns.
_PRODUCERS: dict[tuple[tuple[str, Any], ...], Any] = {}


class KafkaSink(Sink):
    """Writes to Kafka; build one with ``KafkaSink.builder()``."""

    def __init__(
        self,
        properties: dict[str, str],
        delivery_guarantee: DeliveryGuarantee,
        transactional_id_prefix: str,
        record_serializer: KafkaRecordSerializationSchema,
    ) -> None:
        self.properties = dict(properties)
        self.delivery_guarantee = delivery_guarantee
        self.transactional_id_prefix = transactional_id_prefix
        self.record_serializer = record_serializer
        self.transactional = delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        """A builder for a ``KafkaSink``."""
        return KafkaSinkBuilder()

    def producer_config(self) -> dict[str, Any]:
        """The confluent-kafka producer's configuration: the user's properties over defaults
        that match Java's producer (murmur2 key hashing) and Flink's transaction timeout."""
        conf: dict[str, Any] = {
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "log_level": 3,
        }
        if self.transactional:
            conf["transaction.timeout.ms"] = 900_000
        conf.update(self.properties)
        return conf

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        if self.transactional:
            return _TransactionalWriter(self, subtask_index, parallelism, epoch)
        return _PlainWriter(self, wait=self.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE)

    def commit(self, committables: Sequence[Any]) -> None:
        """Commit the transactions (idempotent: one already committed is left as it is)."""
        self._end(committables, commit=True)

    def abort(self, committables: Sequence[Any]) -> None:
        """Abort the transactions (one already ended or fenced is left as it is)."""
        self._end(committables, commit=False)

    def _end(self, committables: Sequence[Any], *, commit: bool) -> None:
        if not self.transactional or not committables:
            return
        admin = TransactionAdmin(self.properties["bootstrap.servers"])
        try:
            for c in committables:
                txn = OpenTransaction(
                    c["transactional_id"], int(c["producer_id"]), int(c["producer_epoch"]), ""
                )
                error = admin.end(txn, commit)
                if error is not None and commit:
                    now = admin.describe(txn.transactional_id)
                    done = now.producer_id == txn.producer_id and now.state == "CompleteCommit"
                    if not done or now.producer_epoch != txn.producer_epoch:
                        raise RuntimeError(
                            f"Kafka transaction {txn.transactional_id} (producer "
                            f"{txn.producer_id}, epoch {txn.producer_epoch}) cannot be "
                            f"committed: {error}, now {now.state} at epoch {now.producer_epoch}"
                            " (aborted by its timeout or fenced): its records are lost"
                        )
        finally:
            admin.close()


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


class _DeliveryErrors:
    """Collects the first delivery error of a producer's records."""

    def __init__(self) -> None:
        self.error: Any = None

    def __call__(self, err: Any, _msg: Any) -> None:
        if err is not None and self.error is None:
            self.error = err

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"Kafka refused a record: {self.error}")


class _PlainWriter(SinkWriter):
    def __init__(self, sink: KafkaSink, wait: bool) -> None:
        self.sink = sink
        self.wait = wait
        conf = sink.producer_config()
        key = tuple(sorted(conf.items()))
        if key not in _PRODUCERS:
            from confluent_kafka import Producer

            errors = _DeliveryErrors()
            conf["on_delivery"] = errors
            _PRODUCERS[key] = (Producer(conf), errors)
        self.producer, self.errors = _PRODUCERS[key]

    def write(self, values: list[Any]) -> None:
        _produce_all(self.producer, self.sink.record_serializer.serialize_batch(values))

    def prepare_commit(self) -> list[Any]:
        if self.wait:
            remaining = self.producer.flush(300)
            if remaining:
                raise RuntimeError(f"{remaining} Kafka records unacknowledged after 300 s")
            self.errors.check()
        return []


class _TransactionalWriter(SinkWriter):
    def __init__(self, sink: KafkaSink, subtask: int, parallelism: int, epoch: int) -> None:
        self.sink = sink
        self.subtask = subtask
        self.parallelism = parallelism
        self.epoch = epoch
        self.transactional_id = f"{sink.transactional_id_prefix}-{subtask}-{epoch}"
        self.producer: Any = None
        self.errors = _DeliveryErrors()
        self.admin = TransactionAdmin(sink.properties["bootstrap.servers"])
        self._fence_lingering()

    def _fence_lingering(self) -> None:
        """Abort what failed attempts left open: this subtask's transactions of this epoch or
        later (none of them can be legitimately open yet) and every transaction of a subtask
        the current parallelism no longer has."""
        own = re.compile(re.escape(self.sink.transactional_id_prefix) + r"-(\d+)-(\d+)")
        conf = self.sink.producer_config()
        for tid in self.admin.list_ongoing():
            m = own.fullmatch(tid)
            if m is None:
                continue
            subtask, epoch = int(m.group(1)), int(m.group(2))
            if (subtask == self.subtask and epoch >= self.epoch) or subtask >= self.parallelism:
                self.admin.fence(tid, conf)

    def _open(self) -> Any:
        from confluent_kafka import Producer

        conf = self.sink.producer_config()
        conf["transactional.id"] = self.transactional_id
        conf["on_delivery"] = self.errors
        producer = Producer(conf)
        producer.init_transactions(60)  # fences a transaction an earlier attempt left open
        producer.begin_transaction()
        return producer

    def write(self, values: list[Any]) -> None:
        if self.producer is None:
            self.producer = self._open()
        _produce_all(self.producer, self.sink.record_serializer.serialize_batch(values))

    def prepare_commit(self) -> list[Any]:
        try:
            if self.producer is None:
                return []
            remaining = self.producer.flush(300)
            if remaining:
                raise RuntimeError(f"{remaining} Kafka records unacknowledged after 300 s")
            self.errors.check()
            # The transaction stays open: the driver commits it with the checkpoint.
            txn = self.admin.describe(self.transactional_id)
            return [
                {
                    "transactional_id": txn.transactional_id,
                    "producer_id": txn.producer_id,
                    "producer_epoch": txn.producer_epoch,
                }
            ]
        finally:
            self.admin.close()


class KafkaSinkBuilder:
    """PyFlink's ``KafkaSinkBuilder``: bootstrap servers and a record serializer are required;
    EXACTLY_ONCE wants a transactional id prefix unique to the job."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix = "kafka-sink"
        self._serializer: KafkaRecordSerializationSchema | None = None

    def build(self) -> KafkaSink:
        """The sink; fails as Flink's builder does (with the missing field's name)."""
        if "bootstrap.servers" not in self._props:
            raise ConfigurationError("bootstrapServers")
        if self._serializer is None:
            raise ConfigurationError("recordSerializer")
        return KafkaSink(self._props, self._guarantee, self._prefix, self._serializer)

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSinkBuilder:
        """The Kafka cluster's bootstrap servers."""
        return self.set_property("bootstrap.servers", bootstrap_servers)

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> KafkaSinkBuilder:
        """EXACTLY_ONCE, AT_LEAST_ONCE or NONE (the default)."""
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise TypeError("deliveryGuarantee")
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> KafkaSinkBuilder:
        """The prefix of the transactional ids (``kafka-sink`` by default); keep it stable
        across restarts and unique per job on the cluster."""
        if len(transactional_id_prefix.encode("utf-8")) > _MAX_PREFIX_BYTES:
            raise ConfigurationError(
                "The configured prefix is too long and the resulting transactionalId might "
                "exceed Kafka's transactionalIds size."
            )
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(
        self, record_serializer: KafkaRecordSerializationSchema
    ) -> KafkaSinkBuilder:
        """How records become Kafka records."""
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: str) -> KafkaSinkBuilder:
        """A producer property (librdkafka's names, which are Kafka's for the common ones)."""
        self._props[key] = value
        return self
