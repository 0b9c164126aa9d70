"""``KafkaSink``: records to Kafka topics with Flink's delivery guarantees.

EXACTLY_ONCE is a two-phase commit on the sink contract: each subtask writes an epoch's records
in one Kafka transaction (named by the ``TransactionNamingStrategy``, see ``kafka_writers``),
flushes it at the epoch's end and hands the driver its producer id and epoch; the driver
commits it when the checkpoint covering the epoch completes, or aborts it on a rollback. After
every commit and restore the driver aborts every other open transaction with the sink's prefix
(INCREMENTING fences its id, POOLING ends it with an ``EndTxn``), as Flink's LISTING abort
strategy: what a failed or killed attempt left open never blocks ``read_committed`` consumers
past the next checkpoint; it also ends what a broker left hanging (``kafka_hanging``).
AT_LEAST_ONCE flushes at every epoch's end; NONE does not wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.connectors.delivery import DeliveryGuarantee
from sparkpoint.connectors.kafka_access import KafkaAccessError
from sparkpoint.connectors.kafka_client_config import (
    check_librdkafka,
    check_properties,
    client_config,
    redacted,
)
from sparkpoint.connectors.kafka_committables import (
    checked_transactions,
    transactional_id_pattern,
)
from sparkpoint.connectors.kafka_hanging import HangingTransaction, end_hanging, find_hanging
from sparkpoint.connectors.kafka_record_schema import KafkaRecordSerializationSchema
from sparkpoint.connectors.kafka_transactions import (
    SUPERSEDED,
    SUPERSEDED_AFTER_FENCE,
    OpenTransaction,
    TransactionAdmin,
)
from sparkpoint.connectors.kafka_writers import (
    PlainWriter,
    TransactionalWriter,
    TransactionNamingStrategy,
)
from sparkpoint.connectors.sink import Sink, SinkWriter
from sparkpoint.errors import ConfigurationError

__all__ = ["KafkaSink", "KafkaSinkBuilder", "TransactionNamingStrategy"]

_LOG = logging.getLogger("sparkpoint.kafka")
_MAX_PREFIX_BYTES = 6400


class KafkaSink(Sink):
    """Writes to Kafka; build one with ``KafkaSink.builder()``."""

    def __init__(
        self,
        properties: dict[str, str],
        delivery_guarantee: DeliveryGuarantee,
        transactional_id_prefix: str,
        record_serializer: KafkaRecordSerializationSchema,
        naming: TransactionNamingStrategy = TransactionNamingStrategy.INCREMENTING,
    ) -> None:
        self.properties = dict(properties)
        self.delivery_guarantee = delivery_guarantee
        self.transactional_id_prefix = transactional_id_prefix
        self.record_serializer = record_serializer
        self.naming = naming
        self.transactional = delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
        #: Lingering transactions the driver has aborted (fenced) so far.
        self.lingering_aborted: list[str] = []
        #: Transactions the driver found hanging and ended so far (``kafka_hanging``).
        self.hanging_completed: list[HangingTransaction] = []
        self._topics: set[str] = set()  # every topic a committable named (topic selectors)
        self._warned: set[str] = set()  # hanging transactions warned about, not ended
        self._protocol_checked = False  # transaction protocol v1 seen at a commit

    def __repr__(self) -> str:
        return (
            f"KafkaSink({redacted(self.properties)!r}, {self.delivery_guarantee.name}, "
            f"prefix={self.transactional_id_prefix!r})"
        )

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        """A builder for a ``KafkaSink``."""
        return KafkaSinkBuilder()

    def producer_config(self) -> dict[str, Any]:
        """The confluent-kafka producer's configuration: the user's properties (Java's names
        translated, ``kafka_client_config``) over defaults that match Java's producer
        (murmur2 key hashing; idempotent unless the user's properties rule it out) and
        Flink's transaction timeout."""
        conf: dict[str, Any] = {
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "log_level": 3,
        }
        if self.transactional:
            conf["transaction.timeout.ms"] = 900_000
        elif _idempotence_allowed(self.properties):
            # librdkafka's default is off: a retried request could then be appended after
            # later ones (a partition's records out of order) or twice (duplicates).
            conf["enable.idempotence"] = True
        conf.update(client_config(self.properties).librdkafka)
        return conf

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        if self.transactional:
            return TransactionalWriter(
                self.producer_config(),
                self.record_serializer,
                self.transactional_id_prefix,
                subtask_index,
                epoch,
                self.naming,
                self.properties,
            )
        return PlainWriter(
            self.producer_config(),
            self.record_serializer,
            wait=self.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE,
        )

    def check_restored(self, committables: Sequence[Any], job_id: str, where: str) -> None:
        """Refuse (``MetadataFormatError`` naming ``where``, the field and the value) any
        committable a restored snapshot names that this sink could not have written."""
        if self.transactional:
            checked_transactions(
                committables, self.transactional_id_prefix, self.record_serializer.topic, where
            )

    def commit(self, committables: Sequence[Any]) -> None:
        """Commit the transactions (idempotent: one already committed is left as it is)."""
        self._end(committables, commit=True)

    def abort(self, committables: Sequence[Any]) -> None:
        """Abort the transactions (one already ended or fenced is left as it is)."""
        self._end(committables, commit=False)

    def abort_lingering(self, keep: Sequence[Any]) -> list[str]:
        """Abort every open transaction with this sink's prefix but those of ``keep`` (the
        committables still waiting for their checkpoint): what failed attempts, killed
        workers or a crashed driver left. Returns the transactional ids aborted.

        INCREMENTING fences each id (a new producer epoch), which also stops a straggling
        task from writing on. POOLING aborts with an ``EndTxn`` at the transaction's own
        producer id and epoch instead: a fence would leave a reused id no transaction start
        time, and a commit redone by a second restore of the same checkpoint could then not
        tell its committable's transaction from a lost one. A straggling task of a failed
        run is then not fenced: the broker refuses its records into the aborted transaction
        (its transaction verification), and one it begins anew is left to the next sweep.

        The sweep is a cleanup beside the commits it follows: a failure of it (a broker
        down, a coordinator moving, an ACL missing) is logged and the next sweep (after the
        next commit) tries again; the commit stands."""
        if not self.transactional:
            return []
        keep_ids = {t.transactional_id for t in self._checked(keep, "the pending commits")}
        own = transactional_id_pattern(self.transactional_id_prefix)
        try:
            admin = TransactionAdmin.shared(self.properties)
            lingering = self._sweep(admin, own.fullmatch, keep_ids)
        except Exception as e:  # the commit it follows has succeeded: not failed for this
            _LOG.warning(
                "Could not abort the lingering Kafka transactions with prefix %r (tried "
                "again after the next commit): %s",
                self.transactional_id_prefix,
                e,
            )
            return []
        self._complete_hanging(admin, lambda tid: own.fullmatch(tid) is not None)
        return lingering

    def _sweep(
        self, admin: TransactionAdmin, own: Callable[[str], Any], keep: set[str]
    ) -> list[str]:
        """Abort the open transactions ``own`` accepts but those of ``keep``; their ids."""
        lingering = [t for t in admin.list_ongoing() if own(t) and t not in keep]
        if self.naming is TransactionNamingStrategy.POOLING:
            lingering = admin.abort_ongoing(lingering)
        else:
            for tid in lingering:
                admin.fence(tid, self.producer_config())
        if lingering:
            _LOG.warning("Aborted %d lingering Kafka transactions: %s", len(lingering), lingering)
            self.lingering_aborted.extend(lingering)
        return lingering

    def _complete_hanging(self, admin: TransactionAdmin, owns: Callable[[str], bool]) -> None:
        """End the sink's transactions a broker left hanging in its topics (``kafka_hanging``;
        POOLING's are only reported); a repair on the side: a failure is logged, and tried
        again at the next sweep."""
        topic = self.record_serializer.topic
        topics = {topic} if topic is not None else self._topics
        pooling = self.naming is TransactionNamingStrategy.POOLING
        try:
            hanging = find_hanging(admin, topics, owns)
        except Exception as e:  # the commit it follows has succeeded: not failed for this
            _LOG.warning("Could not check %s for hanging Kafka transactions: %s", topics, e)
            return
        try:
            if hanging and not pooling:
                end_hanging(admin, hanging)
        except KafkaAccessError as e:
            # WriteTxnMarkers needs ClusterAction, which an application's principal rarely
            # has: one warning per transaction, naming it and the right.
            new = [h for h in hanging if h.transactional_id not in self._warned]
            self._warned.update(h.transactional_id for h in new)
            if new:
                _LOG.warning(
                    "Kafka transactions the broker left hanging (their coordinator ended "
                    "them, their partitions have no marker) could not be ended: %s. %s. "
                    "Grant it, or end them with kafka-transactions.sh as an administrator",
                    [(h.transactional_id, h.open.topic, h.open.partition) for h in new],
                    e,
                )
            return
        except Exception as e:
            _LOG.warning("Could not end the hanging Kafka transactions %s: %s", hanging, e)
            return
        if hanging and pooling:
            _LOG.warning(
                "Kafka transactions the broker left hanging (its coordinator ended them, "
                "their partitions have no marker), not ended: a POOLING id's coordinator "
                "keeps only its latest transaction's decision. Find which transaction each "
                "is before ending it (kafka-transactions.sh abort discards its records): %s",
                [(h.transactional_id, h.open.topic, h.open.partition) for h in hanging],
            )
        elif hanging:
            _LOG.warning(
                "Ended %d Kafka transactions the broker left hanging (its coordinator had "
                "ended them, their partitions had no marker): %s",
                len(hanging),
                [(h.transactional_id, h.open.topic, h.open.partition) for h in hanging],
            )
            self.hanging_completed.extend(hanging)

    def _checked(self, committables: Sequence[Any], where: str) -> list[OpenTransaction]:
        checked = checked_transactions(
            committables,
            self.transactional_id_prefix,
            self.record_serializer.topic,
            f"{where} of the Kafka sink with prefix {self.transactional_id_prefix!r}",
        )
        self._topics.update(t for c in committables for t in c["topics"])
        return checked

    def _end(self, committables: Sequence[Any], *, commit: bool) -> None:
        if not self.transactional or not committables:
            return
        txns = self._checked(committables, "the commit" if commit else "the abort")
        admin = TransactionAdmin.shared(self.properties)
        ended = admin.end_all(txns, commit)
        if commit and not self._protocol_checked:
            self._check_protocol_v1(admin, [t for t, e in zip(txns, ended, strict=True) if not e])
        for txn, error in zip(txns, ended, strict=True):
            if error == SUPERSEDED:
                # A newer transaction began on the id at this producer id and epoch, so this
                # one was ended by an EndTxn of its own epoch (a timeout or a fence bumps
                # it): for a committable of a completed checkpoint that was its commit, as
                # the driver aborts only what no completed checkpoint holds (a rollback
                # aborts the pending ones, the sweep runs after the commits). The newer one
                # (open, or ended: e.g. aborted by a restore's sweep) gets no EndTxn here.
                continue
            if error == SUPERSEDED_AFTER_FENCE and commit:
                self._check_committed_before_fence(admin, txn)
                continue
            if error is not None and commit:
                known = admin.describe_or_none(txn.transactional_id)
                if known is None:
                    raise RuntimeError(
                        f"Kafka transaction {txn.transactional_id} (producer "
                        f"{txn.producer_id}, epoch {txn.producer_epoch}) cannot be "
                        f"committed: {error}, its transactional id is unknown to its "
                        "coordinator (expired): whether it was committed cannot be told"
                    )
                now = known
                done = now.producer_id == txn.producer_id and now.state == "CompleteCommit"
                if not done or now.producer_epoch != txn.producer_epoch:
                    raise RuntimeError(
                        f"Kafka transaction {txn.transactional_id} (producer "
                        f"{txn.producer_id}, epoch {txn.producer_epoch}) cannot be "
                        f"committed: {error}, now {now.state} at epoch {now.producer_epoch}"
                        " (aborted by its timeout or fenced): its records are lost"
                    )

    def _check_protocol_v1(self, admin: TransactionAdmin, committed: list[OpenTransaction]) -> None:
        """Refuse to go on under transaction protocol v2 (KIP-890), seen at the first commit:
        v2 bumps the producer epoch when a transaction ends, which the redo of a commit after
        a restore, POOLING's reuse and the hanging-transaction rule do not expect. librdkafka
        2.16 speaks v1 even where the broker finalized v2 (Kafka 4's default:
        ``test_transaction_version.py``), so this holds until a client upgrade changes it."""
        for txn in committed[:1]:
            now = admin.describe_or_none(txn.transactional_id)
            if now is None or now.state != "CompleteCommit" or now.producer_id != txn.producer_id:
                return  # reused or gone meanwhile: check at a later commit
            self._protocol_checked = True
            if now.producer_epoch != txn.producer_epoch:
                raise ConfigurationError(
                    f"Kafka transaction {txn.transactional_id} ended at producer epoch "
                    f"{now.producer_epoch}, not {txn.producer_epoch}: the producers use "
                    "transaction protocol v2 (KIP-890), which the EXACTLY_ONCE sink does not "
                    "support yet (its commit redo after a restore and POOLING assume a "
                    "transaction's epoch stays). Its records are committed; run the job with "
                    "a client that speaks protocol v1 or set the cluster's "
                    "transaction.version to 1 (kafka-features.sh downgrade)"
                )

    def _check_committed_before_fence(self, admin: TransactionAdmin, txn: OpenTransaction) -> None:
        """A newer transaction on ``txn``'s id follows a fence or timeout (another producer
        epoch): ``txn`` ended before it, committed or timed out. A timeout aborts it
        ``transaction.timeout.ms`` after it began at the earliest, so if the newer one began
        sooner than that, ``txn`` was committed; else its records may be lost: refused."""
        now = admin.describe(txn.transactional_id)  # only on this rare path
        timeout_ms = int(self.producer_config().get("transaction.timeout.ms", 60_000))
        began_after = now.transaction_start_time_ms - txn.transaction_start_time_ms
        if now.transaction_start_time_ms < 0 or began_after >= timeout_ms:
            raise RuntimeError(
                f"Kafka transaction {txn.transactional_id} (producer {txn.producer_id}, "
                f"epoch {txn.producer_epoch}, begun at {txn.transaction_start_time_ms} ms) "
                f"cannot be committed: its id is now {now.state} at epoch "
                f"{now.producer_epoch}, after a fence or a timeout ({began_after} ms later, "
                f"timeout {timeout_ms} ms): it may have been aborted, its records lost"
            )


class KafkaSinkBuilder:
    """PyFlink's ``KafkaSinkBuilder``: bootstrap servers and a record serializer are required;
    EXACTLY_ONCE wants a transactional id prefix unique to the job."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix = "kafka-sink"
        self._serializer: KafkaRecordSerializationSchema | None = None
        self._naming = TransactionNamingStrategy.INCREMENTING

    def build(self) -> KafkaSink:
        """The sink; fails as Flink's builder does (with the missing field's name)."""
        if "bootstrap.servers" not in self._props:
            raise ConfigurationError("bootstrapServers")
        if self._serializer is None:
            raise ConfigurationError("recordSerializer")
        check_properties(self._props)
        sink = KafkaSink(self._props, self._guarantee, self._prefix, self._serializer, self._naming)
        check_librdkafka(sink.producer_config(), "producer")
        return sink

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

    def set_transaction_naming_strategy(
        self, strategy: TransactionNamingStrategy
    ) -> KafkaSinkBuilder:
        """INCREMENTING (the default, as Flink's: a new id and producer per epoch) or POOLING
        (ids and their producers reused; committables carry their transaction's start time,
        so a restore's redone commit leaves a newer transaction on the id alone)."""
        if not isinstance(strategy, TransactionNamingStrategy):
            raise TypeError("transactionNamingStrategy")
        self._naming = strategy
        return self

    def set_record_serializer(
        self, record_serializer: KafkaRecordSerializationSchema
    ) -> KafkaSinkBuilder:
        """How records become Kafka records."""
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: str) -> KafkaSinkBuilder:
        """A producer property: Kafka's Java client names as PyFlink takes them (security
        ones translated, ``docs/kafka-sink.md``) or librdkafka's."""
        self._props[key] = value
        return self


def _idempotence_allowed(props: dict[str, str]) -> bool:
    """Whether Java's producer would be idempotent with ``props``: by default, unless idempotence
    is set, or a property conflicts (acks other than all, no retries, more than 5 requests in
    flight), which turns the default off (Kafka 3.2's ``ProducerConfig``)."""
    if "enable.idempotence" in props:
        return False  # the user's choice stands, as it is
    acks = props.get("acks", props.get("request.required.acks", "all")).strip().lower()
    retries = props.get("retries", props.get("message.send.max.retries"))
    in_flight = props.get("max.in.flight.requests.per.connection", props.get("max.in.flight", "5"))
    try:
        return (
            acks in ("all", "-1") and (retries is None or int(retries) > 0) and int(in_flight) <= 5
        )
    except ValueError:
        return False  # librdkafka refuses the value itself, with its own message
