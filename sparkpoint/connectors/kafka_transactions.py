"""Kafka transactions that outlive the producer that began them, for the exactly-once sink.

librdkafka can only end a transaction from the producer that began it; Flink's committer
resumes one from its producer id and epoch. Here the task that wrote a transaction records its
id and epoch (``DescribeTransactions``), and the driver ends it with an ``EndTxn`` request to
the transaction coordinator. An open transaction is aborted by fencing its id (initialising a
producer with it: a new producer epoch, no transaction then current) or by an ``EndTxn`` at
its own producer id and epoch (``abort_ongoing``: the coordinator keeps them and its start
time). kafka-python's admin client and protocol classes speak the requests librdkafka does not
offer. A broker that is down or a coordinator still loading (a broker restarting) is waited
for, up to ``wait_s``, as Flink's committer retries.

A reused transactional id (POOLING) keeps its producer id and epoch from one transaction to
the next, so those alone cannot tell a committed transaction from a newer one on its id; a
transaction recorded with its start time is ended only while it is still the coordinator's
current one on its id (``SUPERSEDED`` otherwise).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUSY_STATES",
    "SUPERSEDED",
    "SUPERSEDED_AFTER_FENCE",
    "OpenTransaction",
    "PartitionTransaction",
    "TransactionAdmin",
]

# States of a transaction that is neither ended nor unused: its id is not free for another.
BUSY_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
# One admin client per Python process and cluster (``TransactionAdmin.shared``).
_SHARED: dict[str, TransactionAdmin] = {}

# EndTxn v2: the last version before KIP-890's epoch bump per transaction, so ending the same
# transaction twice with the same epoch is a no-op (a commit redone after a restore).
_END_TXN_VERSION = 2
# Kafka's errors that mean "this transaction is no longer the producer's current one".
_FENCED = {47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE", 90: "PRODUCER_FENCED"}
# Errors of a coordinator that is busy, moving or loading its state: try again.
_RETRIABLE = {
    7: "REQUEST_TIMED_OUT",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    51: "CONCURRENT_TRANSACTIONS",
}
# ``end_all``'s answers for a transaction that a newer one on its id followed, so it had
# ended: at the same producer id and epoch (ended by an EndTxn of its own epoch, as a
# timeout or a fence would have bumped the epoch), or at another (a fence came between).
SUPERSEDED = "SUPERSEDED"
SUPERSEDED_AFTER_FENCE = "SUPERSEDED_AFTER_FENCE"
_SUPERSEDED_CODES = {-1: SUPERSEDED, -2: SUPERSEDED_AFTER_FENCE}  # not Kafka's codes
_WAIT_S = 180.0  # how long a broker may stay unreachable before a call fails
_BACKOFF_S = 0.5


class _Retriable(Exception):
    """A retriable error code in a response."""


@dataclass(frozen=True)
class PartitionTransaction:
    """A transaction open in one partition as its leader (a broker id) sees it: the producer
    id and epoch that wrote it, the coordinator epoch the leader last saw, the offset of its
    first record."""

    topic: str
    partition: int
    leader: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction the coordinator knows: its transactional id, producer id and epoch, its
    state as Kafka names it (``Ongoing``, ``CompleteCommit``, ...) and the coordinator's
    clock when it began (``transaction_start_time_ms``, -1 when unknown or none)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    transaction_start_time_ms: int = -1


class TransactionAdmin:
    """Describe, list, end and fence transactions of one Kafka cluster; list those open in
    partitions and write their markers (``kafka_hanging``)."""

    def __init__(self, bootstrap_servers: str, wait_s: float = _WAIT_S) -> None:
        from kafka.admin import KafkaAdminClient

        self.bootstrap_servers = bootstrap_servers
        self.wait_s = wait_s
        self._correlation = 0
        self._addresses: dict[int, tuple[str, int]] = {}  # broker id -> host and port
        self.admin = self._retrying(lambda: KafkaAdminClient(bootstrap_servers=bootstrap_servers))

    def _retrying(self, call: Callable[[], Any]) -> Any:
        """``call()``, again after a broker or coordinator error that may pass, for up to
        ``wait_s``."""
        from kafka.errors import RetriableError

        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                return call()
            except (RetriableError, OSError, _Retriable):
                if time.monotonic() > deadline:
                    raise
                time.sleep(_BACKOFF_S)

    @staticmethod
    def shared(bootstrap_servers: str) -> TransactionAdmin:
        """This process's admin client for the cluster, created on first use (a new one
        costs a connection and version probes: ~0.1 s)."""
        admin = _SHARED.get(bootstrap_servers)
        if admin is None:
            admin = _SHARED[bootstrap_servers] = TransactionAdmin(bootstrap_servers)
        return admin

    def close(self) -> None:
        """Close the admin client's connections."""
        self.admin.close()

    def describe_or_none(self, transactional_id: str) -> OpenTransaction | None:
        """Like ``describe``; None when the coordinator does not know ``transactional_id``."""
        from kafka.errors import TransactionalIdNotFoundError

        try:
            return self.describe(transactional_id)
        except TransactionalIdNotFoundError:
            return None

    def describe(self, transactional_id: str) -> OpenTransaction:
        """The current producer id, epoch, state and start time of ``transactional_id``."""
        d = self._retrying(lambda: self.admin.describe_transactions([transactional_id]))[
            transactional_id
        ]
        return _described(transactional_id, d)

    def list_ongoing(self) -> list[str]:
        """Transactional ids with an ongoing transaction, on every broker."""
        listings = self._retrying(lambda: self.admin.list_transactions(state_filters=["Ongoing"]))
        return sorted({t.transactional_id for per_broker in listings.values() for t in per_broker})

    def end(self, txn: OpenTransaction, commit: bool) -> str | None:
        """Commit or abort ``txn``; None when done, else the error's name when the
        transaction is no longer the producer's current one (fenced, timed out)."""
        return self.end_all([txn], commit)[0]

    def end_all(self, txns: Sequence[OpenTransaction], commit: bool) -> list[str | None]:
        """Commit or abort every transaction of ``txns`` at once: one
        ``DescribeTransactions`` finds their coordinators, and each coordinator gets its
        ``EndTxn`` requests pipelined on one connection (no round trip per transaction).
        Returns, in the order of ``txns``, None for each one done, else the error's name
        when it is no longer its producer's current transaction (fenced, timed out), or
        ``SUPERSEDED``/``SUPERSEDED_AFTER_FENCE`` when it has a start time and the id's
        current transaction began at another: that newer one is left alone (no EndTxn)."""
        out: list[str | None] = [None] * len(txns)
        # A transactional id named twice is ended in a later round, after the first.
        rounds: list[dict[str, int]] = []
        for i, txn in enumerate(txns):
            free = next((r for r in rounds if txn.transactional_id not in r), None)
            if free is None:
                free = {}
                rounds.append(free)
            free[txn.transactional_id] = i
        for by_id in rounds:
            todo = [txns[i] for i in by_id.values()]
            for tid, error in self._end_round(todo, commit).items():
                out[by_id[tid]] = error
        return out

    def _end_round(self, txns: Sequence[OpenTransaction], commit: bool) -> dict[str, str | None]:
        """``end_all`` for transactions with distinct ids, retrying those whose
        coordinator is busy or moving (up to ``wait_s``)."""
        out: dict[str, str | None] = {}
        todo = list(txns)
        deadline = time.monotonic() + self.wait_s
        while todo:
            codes: dict[str, int] = self._retrying(
                lambda batch=todo: self._end_batch(batch, commit)  # type: ignore[misc]
            )
            again = [t for t in todo if codes[t.transactional_id] in _RETRIABLE]
            for txn in todo:
                code = codes[txn.transactional_id]
                if code == 0:
                    out[txn.transactional_id] = None
                elif code in _SUPERSEDED_CODES:
                    out[txn.transactional_id] = _SUPERSEDED_CODES[code]
                elif code in _FENCED:
                    out[txn.transactional_id] = _FENCED[code]
                elif code not in _RETRIABLE:
                    raise RuntimeError(
                        f"EndTxn({'commit' if commit else 'abort'}) of {txn.transactional_id} "
                        f"failed with Kafka error {code}"
                    )
            if again:
                if time.monotonic() > deadline:
                    first = again[0].transactional_id
                    raise RuntimeError(
                        f"EndTxn of {first}: {_RETRIABLE[codes[first]]} for {self.wait_s:.0f} s"
                    )
                time.sleep(_BACKOFF_S)
            todo = again
        return out

    def _end_batch(self, txns: Sequence[OpenTransaction], commit: bool) -> dict[str, int]:
        """One ``EndTxn`` per transaction still current on its id, pipelined per coordinator;
        the error code of each (by transactional id)."""
        described = self.admin.describe_transactions([t.transactional_id for t in txns])
        by_coordinator: dict[int, list[OpenTransaction]] = {}
        codes: dict[str, int] = {}
        for txn in txns:
            d = described[txn.transactional_id]
            superseded = _superseded(txn, _described(txn.transactional_id, d))
            if superseded:
                codes[txn.transactional_id] = superseded
                continue
            by_coordinator.setdefault(d.coordinator_id, []).append(txn)
        for coordinator, own in by_coordinator.items():
            codes.update(self._end_pipelined(coordinator, own, commit))
        return codes

    def _end_pipelined(
        self, coordinator: int, txns: Sequence[OpenTransaction], commit: bool
    ) -> dict[str, int]:
        from kafka.protocol.producer.transaction import EndTxnRequest, EndTxnResponse

        requests = [
            EndTxnRequest(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                committed=commit,
            )
            for txn in txns
        ]
        responses = self._pipelined(coordinator, requests, EndTxnResponse, _END_TXN_VERSION)
        return {
            txn.transactional_id: int(response.error_code)
            for txn, response in zip(txns, responses, strict=True)
        }

    def _pipelined(
        self, node_id: int, requests: Sequence[Any], response_type: Any, version: int
    ) -> list[Any]:
        """Send ``requests`` to broker ``node_id`` on one connection without waiting between
        them; their responses, in order (a broker answers a connection's requests in
        order)."""
        frames = []
        for request in requests:
            self._correlation += 1
            request.with_header(correlation_id=self._correlation, client_id="sparkpoint-committer")
            frames.append(request.encode(version=version, header=True, framed=True))
        try:
            conn = socket.create_connection(self._address(node_id), timeout=30)
        except OSError:
            self._addresses.clear()  # the broker may have moved: ask the cluster again
            raise
        with conn:
            conn.sendall(b"".join(frames))
            return [
                response_type.decode(_read_frame(conn), version=version, header=True)
                for _ in requests
            ]

    def abort_ongoing(self, transactional_ids: Sequence[str]) -> list[str]:
        """Abort the ongoing transaction of each id with an ``EndTxn`` at its own producer id
        and epoch, as described now: unlike a fence, this leaves the coordinator the
        transaction's start time and epoch, so a later commit of an older committable on the
        id can tell it was superseded. One that ended, or was followed by a newer one, since
        the describe is left alone. Returns the ids whose transaction this aborted."""
        if not transactional_ids:
            return []
        ongoing = [t for t in self.describe_all(transactional_ids).values() if t.state == "Ongoing"]
        ended = self.end_all(ongoing, commit=False)
        return [t.transactional_id for t, error in zip(ongoing, ended, strict=True) if not error]

    def fence(self, transactional_id: str, producer_config: dict[str, Any]) -> None:
        """Abort whatever transaction ``transactional_id`` has open (a new producer epoch)."""
        from confluent_kafka import Producer

        conf = dict(producer_config)
        conf["transactional.id"] = transactional_id
        producer = Producer(conf)
        producer.init_transactions(60)
        producer.flush(10)

    def describe_all(self, transactional_ids: Sequence[str]) -> dict[str, OpenTransaction]:
        """``describe`` of each id, in one request per coordinator."""
        described = self._retrying(lambda: self.admin.describe_transactions(transactional_ids))
        return {tid: _described(tid, described[tid]) for tid in transactional_ids}

    def transactional_ids(self, producer_ids: Iterable[int]) -> dict[int, str]:
        """The transactional id each of ``producer_ids`` has now, where the coordinators know
        one (``ListTransactions`` filtered by producer id, every state)."""
        wanted = sorted(set(producer_ids))
        if not wanted:
            return {}
        listings = self._retrying(lambda: self.admin.list_transactions(producer_id_filters=wanted))
        return {t.producer_id: t.transactional_id for per in listings.values() for t in per}

    def open_in_topics(self, topics: Iterable[str]) -> list[PartitionTransaction]:
        """The transactions open in the partitions of ``topics``, as the partitions' leaders
        see them (``DescribeProducers``): a partition's records after the first of an open
        transaction are invisible to ``read_committed`` consumers until its marker."""
        names = sorted(set(topics))
        if not names:
            return []
        leaders = self._partition_leaders(names)
        by_leader: dict[int, list[Any]] = {}
        for tp, leader in leaders.items():
            by_leader.setdefault(leader, []).append(tp)
        states: dict[Any, Any] = {}
        for leader, partitions in by_leader.items():  # to each leader, no second lookup

            def describe(ps: list[Any] = partitions, broker: int = leader) -> Any:
                return self.admin.describe_producers(ps, broker_id=broker)

            states.update(self._retrying(describe))
        return [
            PartitionTransaction(
                tp.topic,
                tp.partition,
                leaders[tp],
                p.producer_id,
                p.producer_epoch,
                p.coordinator_epoch,
                p.current_transaction_start_offset,
            )
            for tp, state in states.items()
            for p in state.active_producers
            if p.current_transaction_start_offset >= 0
        ]

    def write_markers(self, txns: Sequence[PartitionTransaction], commit: bool) -> None:
        """Write a COMMIT (or ABORT) marker for each open transaction of ``txns`` in its
        partition (``WriteTxnMarkers`` to the partition's leader, what a coordinator sends;
        Kafka's admin ``abortTransaction`` does the same for an abort)."""
        from kafka.protocol.producer.transaction import (
            WriteTxnMarkersRequest,
            WriteTxnMarkersResponse,
        )

        marker, topic = (
            WriteTxnMarkersRequest.WritableTxnMarker,
            WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic,
        )
        by_leader: dict[int, list[PartitionTransaction]] = {}
        for txn in txns:
            by_leader.setdefault(txn.leader, []).append(txn)
        for leader, own in by_leader.items():
            requests = [
                WriteTxnMarkersRequest(
                    markers=[
                        marker(
                            producer_id=t.producer_id,
                            producer_epoch=t.producer_epoch,
                            transaction_result=commit,
                            topics=[topic(name=t.topic, partition_indexes=[t.partition])],
                            coordinator_epoch=t.coordinator_epoch,
                        )
                    ]
                )
                for t in own
            ]
            responses = self._pipelined(leader, requests, WriteTxnMarkersResponse, 1)
            for t, response in zip(own, responses, strict=True):
                codes = [
                    p.error_code
                    for m in response.markers
                    for tr in m.topics
                    for p in tr.partitions
                    if p.error_code
                ]
                if codes:
                    raise RuntimeError(
                        f"WriteTxnMarkers({'commit' if commit else 'abort'}) for producer "
                        f"{t.producer_id} in {t.topic}-{t.partition} failed with Kafka error "
                        f"{codes[0]}"
                    )

    def _partition_leaders(self, topics: Sequence[str]) -> dict[Any, int]:
        from kafka import TopicPartition

        described = self._retrying(lambda: self.admin.describe_topics(list(topics)))
        return {
            TopicPartition(t["name"], p["partition_index"]): int(p["leader_id"])
            for t in described
            if t["error_code"] == 0
            for p in t["partitions"]
        }

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id not in self._addresses:
            for broker in self.admin.describe_cluster()["brokers"]:
                self._addresses[int(broker["broker_id"])] = (
                    str(broker["host"]),
                    int(broker["port"]),
                )
        if node_id not in self._addresses:
            raise RuntimeError(f"Kafka broker {node_id} is not in the cluster's metadata")
        return self._addresses[node_id]


def _described(transactional_id: str, d: Any) -> OpenTransaction:
    """kafka-python's description of a transaction as an ``OpenTransaction``."""
    state = str(getattr(d.state, "value", d.state))  # Kafka's name: "Ongoing", "Empty"...
    start = int(getattr(d, "transaction_start_time_ms", -1))
    return OpenTransaction(transactional_id, d.producer_id, d.producer_epoch, state, start)


def _superseded(txn: OpenTransaction, now: OpenTransaction) -> int:
    """0 when ``txn`` may still be the id's current transaction, else which code of
    ``_SUPERSEDED_CODES``. Without a recorded start time (a committable of an older
    checkpoint) nothing can be told: 0. The coordinator keeps a transaction's start time
    through its commit or abort and sets a new one when the id's next transaction begins."""
    if txn.transaction_start_time_ms < 0:
        return 0
    if now.transaction_start_time_ms in (-1, txn.transaction_start_time_ms):
        return 0  # its own, or the id is unknown/Empty: EndTxn answers as before
    if (now.producer_id, now.producer_epoch) == (txn.producer_id, txn.producer_epoch):
        return -1
    return -2


def _read_frame(conn: socket.socket) -> bytes:
    size = struct.unpack(">i", _read_exact(conn, 4))[0]
    return _read_exact(conn, size)


def _read_exact(conn: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the Kafka broker closed the connection")
        buf += chunk
    return bytes(buf)
