"""Kafka transactions that outlive the producer that began them, for the exactly-once sink.

librdkafka can only end a transaction from the producer that began it; Flink's committer
resumes one from its producer id and epoch. Here the task that wrote a transaction records its
id and epoch (``DescribeTransactions``), and the driver ends it with an ``EndTxn`` request to
the transaction coordinator. An open transaction is aborted by fencing its id (initialising a
producer with it: a new producer epoch, no transaction then current) or by an ``EndTxn`` at
its own producer id and epoch (``abort_ongoing``: the coordinator keeps them and its start
time). kafka-python's admin client speaks the requests librdkafka does not offer, over its own
connections with the job's TLS and SASL settings (``kafka_client_config``), with its protocol
classes; errors are classified by its error classes. A broker that is down, a coordinator
still loading or moving, a partition whose leader moved (metadata asked again) are waited for,
up to ``wait_s``, as Flink's committer retries; a refused principal or credentials fail at
once (``KafkaAccessError``, naming the ACL).

A reused transactional id (POOLING) keeps its producer id and epoch from one transaction to
the next, so those alone cannot tell a committed transaction from a newer one on its id; a
transaction recorded with its start time is ended only while it is still the coordinator's
current one on its id (``SUPERSEDED`` otherwise).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkpoint.connectors.kafka_access import KafkaAccessError, denied
from sparkpoint.connectors.kafka_client_config import client_config
from sparkpoint.connectors.kafka_readers import throttle_kafka_python

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
# Requests pipelined on one connection at most (kafka-python refuses more in flight).
_IN_FLIGHT = 32
# How long one bootstrap of the admin client may take before it is tried again.
_BOOTSTRAP_MS = 15_000
# ``end_all``'s answers for a transaction that a newer one on its id followed, so it had
# ended: at the same producer id and epoch (ended by an EndTxn of its own epoch, as a
# timeout or a fence would have bumped the epoch), or at another (a fence came between).
SUPERSEDED = "SUPERSEDED"
SUPERSEDED_AFTER_FENCE = "SUPERSEDED_AFTER_FENCE"
_SUPERSEDED_CODES = {-1: SUPERSEDED, -2: SUPERSEDED_AFTER_FENCE}  # not Kafka's codes
_WAIT_S = 180.0  # how long a broker may stay unreachable before a call fails
_BACKOFF_S = 0.5


_LOG = logging.getLogger("sparkpoint.kafka")
_BOOTSTRAP_LOCK = threading.Lock()


class _Retriable(Exception):
    """A retriable error in a response (a coordinator or leader to find again)."""


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
    partitions and write their markers (``kafka_hanging``). ``properties`` are the sink's
    (any of the connector's names, ``kafka_client_config``), or bootstrap servers alone."""

    def __init__(self, properties: Mapping[str, str] | str, wait_s: float = _WAIT_S) -> None:
        props = (
            {"bootstrap.servers": properties} if isinstance(properties, str) else dict(properties)
        )
        self.properties = props
        self.bootstrap_servers = props["bootstrap.servers"]
        self.wait_s = wait_s
        self._coordinators: dict[str, int] = {}  # transactional id -> its coordinator's id
        self.admin = self._retrying(self._connect)

    def _connect(self) -> Any:
        """kafka-python's admin client, bootstrapped; a refused TLS handshake or login
        during the bootstrap fails at once (kafka-python retries them until its timeout)."""
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaTimeoutError

        throttle_kafka_python()  # a broker gone for good: a line a minute per logger
        kwargs = dict(client_config(self.properties).kafka_python)
        kwargs.update(
            client_id="sparkpoint-committer",
            max_in_flight_requests_per_connection=_IN_FLIGHT,
            bootstrap_timeout_ms=_BOOTSTRAP_MS,
        )
        with _BOOTSTRAP_LOCK, _BootstrapFailures() as failures:
            try:
                return KafkaAdminClient(**kwargs)
            except KafkaTimeoutError as e:
                refused = failures.refused()
                if refused is not None:
                    raise refused from e
                raise
            except Exception as e:
                refused = _refused(e, "connecting", self.bootstrap_servers)
                if refused is not None:
                    raise refused from e
                raise

    def _retrying(self, call: Callable[[], Any]) -> Any:
        """``call()``, again after a broker, coordinator or leader error that may pass, for
        up to ``wait_s``; a refused principal or credentials are not retried."""
        from kafka.errors import KafkaError

        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                return call()
            except KafkaAccessError:
                raise
            except (KafkaError, OSError, _Retriable) as e:
                refused = _refused(e, "a request", self.bootstrap_servers)
                if refused is not None:
                    raise refused from e
                if isinstance(e, KafkaError) and not e.retriable:
                    raise
                if time.monotonic() > deadline:
                    raise
                self._coordinators.clear()  # a coordinator may have moved: ask again
                time.sleep(_BACKOFF_S)

    @staticmethod
    def shared(properties: Mapping[str, str] | str) -> TransactionAdmin:
        """This process's admin client for the cluster and client settings, created on
        first use (a new one costs a connection and version probes: ~0.1 s)."""
        props = (
            {"bootstrap.servers": properties} if isinstance(properties, str) else dict(properties)
        )
        # The values themselves (a password's repr is redacted): one client per credentials.
        key = repr(sorted((k, str(v)) for k, v in client_config(props).kafka_python.items()))
        admin = _SHARED.get(key)
        if admin is None:
            admin = _SHARED[key] = TransactionAdmin(props)
        return admin

    def close(self) -> None:
        """Close the admin client's connections."""
        self.admin.close()

    # -- requests, run on kafka-python's IO thread ------------------------------------------
    def _run(self, coro: Callable[..., Any], *args: Any) -> Any:
        return self.admin._manager.run(coro, *args)

    async def _send_all(self, node_id: int, requests: Sequence[Any]) -> list[Any]:
        """``requests`` to broker ``node_id`` over kafka-python's connection (with its TLS
        and SASL), pipelined up to ``_IN_FLIGHT`` at a time; their responses, in order."""
        from kafka.errors import UnknownBrokerIdError

        manager = self.admin._manager
        out: list[Any] = []
        for i in range(0, len(requests), _IN_FLIGHT - 1):
            try:
                futures = [
                    manager.send(r, node_id=node_id) for r in requests[i : i + _IN_FLIGHT - 1]
                ]
            except UnknownBrokerIdError as e:
                # A coordinator or leader on a broker the client's metadata lost (it was down
                # at the last refresh): metadata again, and the caller asks again.
                manager.cluster.request_update()
                raise _Retriable(f"broker {node_id} is not in the client's metadata") from e
            for future in futures:
                out.append(await future)
        return out

    async def _find_coordinators(self, transactional_ids: Sequence[str]) -> dict[str, Any]:
        """The coordinator (broker id) of each id, or the error class that answered for it;
        cached until an error says one moved."""
        import kafka.errors as errors
        from kafka.protocol.metadata import FindCoordinatorRequest

        out: dict[str, Any] = {
            t: self._coordinators[t] for t in transactional_ids if t in self._coordinators
        }
        unknown = [t for t in transactional_ids if t not in out]
        if not unknown:
            return out
        manager = self.admin._manager
        if manager.broker_version_data.api_version(FindCoordinatorRequest) >= 4:
            request = FindCoordinatorRequest(key_type=1, coordinator_keys=unknown, min_version=4)
            response = await manager.send(request)
            answers = [(c.key, c.error_code, c.node_id) for c in response.coordinators]
        else:
            answers = []
            for tid in unknown:
                r = await manager.send(FindCoordinatorRequest(key=tid, key_type=1, max_version=3))
                answers.append((tid, r.error_code, r.node_id))
        for tid, code, node_id in answers:
            if code == 0:
                out[tid] = self._coordinators[tid] = int(node_id)
            else:
                out[tid] = errors.for_code(code)
        return out

    async def _describe_async(self, transactional_ids: Sequence[str]) -> dict[str, Any]:
        """``DescribeTransactions`` of each id at its coordinator: an ``OpenTransaction``
        (with ``coordinator``) or the error class of that id alone."""
        import kafka.errors as errors
        from kafka.protocol.admin.transactions import DescribeTransactionsRequest

        coordinators = await self._find_coordinators(list(dict.fromkeys(transactional_ids)))
        by_node: dict[int, list[str]] = {}
        out: dict[str, Any] = {}
        for tid, c in coordinators.items():
            if isinstance(c, int):
                by_node.setdefault(c, []).append(tid)
            else:
                out[tid] = c
        for node, tids in by_node.items():
            [response] = await self._send_all(
                node, [DescribeTransactionsRequest(transactional_ids=tids)]
            )
            for state in response.transaction_states:
                error = errors.for_code(state.error_code)
                if error is not errors.NoError:
                    if error in (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError):
                        self._coordinators.pop(state.transactional_id, None)
                    out[state.transactional_id] = error
                    continue
                out[state.transactional_id] = _Described(
                    OpenTransaction(
                        state.transactional_id,
                        state.producer_id,
                        state.producer_epoch,
                        str(state.transaction_state),
                        int(state.transaction_start_time_ms),
                    ),
                    node,
                )
        return out

    def _describe_retrying(self, transactional_ids: Sequence[str]) -> dict[str, Any]:
        """``_describe_async``, the ids with a retriable error asked again (up to
        ``wait_s``); a refused one raises ``KafkaAccessError``."""
        out: dict[str, Any] = {}
        todo = list(dict.fromkeys(transactional_ids))
        deadline = time.monotonic() + self.wait_s
        while todo:
            got = self._retrying(lambda ids=todo: self._run(self._describe_async, ids))  # type: ignore[misc]
            again = []
            for tid in todo:
                d = got[tid]
                if isinstance(d, _Described):
                    out[tid] = d
                    continue
                refused = denied("DescribeTransactions", d.errno, tid, d.__name__)
                if refused is not None:
                    raise refused
                if d.retriable:
                    again.append(tid)
                else:
                    out[tid] = d
            if again and time.monotonic() > deadline:
                raise RuntimeError(
                    f"DescribeTransactions of {again[0]}: {got[again[0]].__name__} for "
                    f"{self.wait_s:.0f} s"
                )
            if again:
                self._coordinators.clear()
                time.sleep(_BACKOFF_S)
            todo = again
        return out

    # -- the public operations --------------------------------------------------------------
    def describe_or_none(self, transactional_id: str) -> OpenTransaction | None:
        """Like ``describe``; None when the coordinator does not know ``transactional_id``."""
        from kafka.errors import TransactionalIdNotFoundError

        try:
            return self.describe(transactional_id)
        except TransactionalIdNotFoundError:
            return None

    def describe(self, transactional_id: str) -> OpenTransaction:
        """The current producer id, epoch, state and start time of ``transactional_id``."""
        d = self._describe_retrying([transactional_id])[transactional_id]
        if not isinstance(d, _Described):
            raise d(f"DescribeTransactions failed for transactional id {transactional_id!r}")
        return d.txn

    def describe_all(self, transactional_ids: Sequence[str]) -> dict[str, OpenTransaction]:
        """``describe`` of each id, in one request per coordinator; an id the coordinator
        does not know (expired, never used) is left out, and fails none of the others."""
        from kafka.errors import TransactionalIdNotFoundError

        out: dict[str, OpenTransaction] = {}
        for tid, d in self._describe_retrying(transactional_ids).items():
            if isinstance(d, _Described):
                out[tid] = d.txn
            elif d is not TransactionalIdNotFoundError:
                raise d(f"DescribeTransactions failed for transactional id {tid!r}")
        return out

    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version`` (KIP-890: 2 bumps the producer
        epoch at every transaction's end for clients that speak it; 0 or 1 never)."""
        features = self._retrying(self.admin.describe_features)
        level = features.get("transaction.version", {}).get("finalized", (0, 0))
        return int(level[1])

    def list_ongoing(self) -> list[str]:
        """Transactional ids with an ongoing transaction, on every broker."""
        listings = self._retrying(lambda: self.admin.list_transactions(state_filters=["Ongoing"]))
        return sorted({t.transactional_id for per_broker in listings.values() for t in per_broker})

    def end(self, txn: OpenTransaction, commit: bool) -> str | None:
        """Commit or abort ``txn``; None when done, else the error's name when the
        transaction is no longer the producer's current one (fenced, timed out)."""
        return self.end_all([txn], commit)[0]

    def end_all(self, txns: Sequence[OpenTransaction], commit: bool) -> list[str | None]:
        """Commit or abort every transaction of ``txns`` at once: each coordinator gets its
        ``EndTxn`` requests pipelined on one connection (no round trip per transaction).
        Transactions with a start time are described first (one ``DescribeTransactions``
        per coordinator), to tell a superseded one; those without (INCREMENTING's) need
        only their coordinators, cached after the first ``FindCoordinator``.
        Returns, in the order of ``txns``, None for each one done, else the error's name
        when it is no longer its producer's current transaction (fenced, timed out, its id
        unknown), or ``SUPERSEDED``/``SUPERSEDED_AFTER_FENCE`` when it has a start time and
        the id's current transaction began at another: that newer one is left alone (no
        EndTxn). One transaction's error does not stop the others'."""
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
        import kafka.errors as errors

        out: dict[str, str | None] = {}
        todo = list(txns)
        deadline = time.monotonic() + self.wait_s
        request = f"EndTxn({'commit' if commit else 'abort'})"
        while todo:
            answers: dict[str, Any] = self._retrying(
                lambda batch=todo: self._end_batch(batch, commit)  # type: ignore[misc]
            )
            again = []
            for txn in todo:
                tid = txn.transactional_id
                answer = answers[tid]
                if answer is None or isinstance(answer, str):
                    out[tid] = answer  # done, or superseded
                    continue
                refused = denied("EndTxn", answer.errno, tid, answer.__name__)
                if refused is not None:
                    raise refused
                if answer.retriable:
                    again.append(txn)
                elif answer is errors.TransactionalIdNotFoundError and not commit:
                    out[tid] = None  # nothing of the id's is open
                elif answer in _NOT_CURRENT or answer is errors.TransactionalIdNotFoundError:
                    out[tid] = _kafka_name(answer)
                else:
                    raise RuntimeError(
                        f"{request} of {tid} failed with Kafka error {_kafka_name(answer)}"
                    )
            if again:
                if time.monotonic() > deadline:
                    first = again[0].transactional_id
                    raise RuntimeError(
                        f"{request} of {first}: {_kafka_name(answers[first])} for "
                        f"{self.wait_s:.0f} s"
                    )
                self._coordinators.clear()
                time.sleep(_BACKOFF_S)
            todo = again
        return out

    def _end_batch(self, txns: Sequence[OpenTransaction], commit: bool) -> dict[str, Any]:
        """One ``EndTxn`` per transaction still current on its id, pipelined per coordinator;
        per transactional id: None (done), a ``SUPERSEDED*`` name, or an error class."""
        return self._run(self._end_batch_async, list(txns), commit)  # type: ignore[no-any-return]

    async def _end_batch_async(self, txns: list[OpenTransaction], commit: bool) -> dict[str, Any]:
        import kafka.errors as errors
        from kafka.protocol.producer.transaction import EndTxnRequest

        # Only a transaction with a start time can be told superseded (``_superseded``): one
        # without (INCREMENTING's, older checkpoints') needs only its coordinator, cached.
        dated = [t.transactional_id for t in txns if t.transaction_start_time_ms >= 0]
        undated = [t.transactional_id for t in txns if t.transaction_start_time_ms < 0]
        described = await self._describe_async(dated) if dated else {}
        coordinators = await self._find_coordinators(undated) if undated else {}
        by_coordinator: dict[int, list[OpenTransaction]] = {}
        out: dict[str, Any] = {}
        for txn in txns:
            tid = txn.transactional_id
            if txn.transaction_start_time_ms < 0:
                d = coordinators[tid]
                if isinstance(d, int):
                    by_coordinator.setdefault(d, []).append(txn)
                else:
                    out[tid] = d
                continue
            d = described[tid]
            if not isinstance(d, _Described):
                out[tid] = d
                continue
            superseded = _superseded(txn, d.txn)
            if superseded:
                out[tid] = _SUPERSEDED_CODES[superseded]
                continue
            by_coordinator.setdefault(d.coordinator, []).append(txn)
        for coordinator, own in by_coordinator.items():
            requests = [
                EndTxnRequest(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    producer_epoch=t.producer_epoch,
                    committed=commit,
                    max_version=_END_TXN_VERSION,
                )
                for t in own
            ]
            responses = await self._send_all(coordinator, requests)
            for t, response in zip(own, responses, strict=True):
                error = errors.for_code(response.error_code)
                if error in (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError):
                    self._coordinators.pop(t.transactional_id, None)
                out[t.transactional_id] = None if error is errors.NoError else error
        # EndTxn names an id its coordinator does not know as a producer id mismatch: a
        # describe tells that apart (the id's own error), as for a described transaction.
        unknown = [tid for tid in undated if out.get(tid) is errors.InvalidProducerIdMappingError]
        if unknown:
            for tid, d in (await self._describe_async(unknown)).items():
                if not isinstance(d, _Described):
                    out[tid] = d
        return out

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
        from confluent_kafka import KafkaException, Producer

        from sparkpoint.connectors.kafka_access import librdkafka_denied

        conf = dict(producer_config)
        conf["transactional.id"] = transactional_id
        producer = Producer(conf)
        try:
            producer.init_transactions(60)
        except KafkaException as e:
            refused = librdkafka_denied(e, "InitProducerId", transactional_id)
            if refused is not None:
                raise refused from e
            raise
        producer.flush(10)

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
        transaction are invisible to ``read_committed`` consumers until its marker. Leaders
        are looked up afresh, and again for a partition whose leader moved meanwhile."""
        names = sorted(set(topics))
        if not names:
            return []
        return self._retrying(lambda: self._run(self._open_in_topics_async, names))  # type: ignore[no-any-return]

    async def _open_in_topics_async(self, names: list[str]) -> list[PartitionTransaction]:
        import kafka.errors as errors
        from kafka.protocol.admin.transactions import DescribeProducersRequest

        leaders = await self._leaders(names)
        by_leader: dict[int, dict[str, list[int]]] = {}
        for (topic, partition), leader in leaders.items():
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        out: list[PartitionTransaction] = []
        for leader, parts in by_leader.items():
            topic_type = DescribeProducersRequest.TopicRequest
            request = DescribeProducersRequest(
                topics=[topic_type(name=t, partition_indexes=ps) for t, ps in parts.items()]
            )
            [response] = await self._send_all(leader, [request])
            for topic in response.topics:
                for p in topic.partitions:
                    error = errors.for_code(p.error_code)
                    if error is not errors.NoError:
                        refused = denied(
                            "DescribeProducers", p.error_code, topic.name, error.__name__
                        )
                        if refused is not None:
                            raise refused
                        if error.retriable:  # e.g. the leader moved: metadata again
                            self.admin._manager.cluster.request_update()
                            where = f"{topic.name}-{p.partition_index}"
                            raise _Retriable(f"DescribeProducers of {where}: {error.__name__}")
                        raise error(f"DescribeProducers of {topic.name}-{p.partition_index}")
                    out.extend(
                        PartitionTransaction(
                            topic.name,
                            p.partition_index,
                            leader,
                            a.producer_id,
                            a.producer_epoch,
                            a.coordinator_epoch,
                            a.current_txn_start_offset,
                        )
                        for a in p.active_producers
                        if a.current_txn_start_offset >= 0
                    )
        return out

    async def _leaders(self, topics: list[str]) -> dict[tuple[str, int], int]:
        """Each partition's leader now (a ``Metadata`` request; none cached)."""
        import kafka.errors as errors
        from kafka.protocol.metadata import MetadataRequest

        response = await self.admin._manager.send(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False,
            )
        )
        out: dict[tuple[str, int], int] = {}
        for t in response.topics:
            error = errors.for_code(t.error_code)
            if error is not errors.NoError:
                refused = denied("Metadata", t.error_code, t.name, error.__name__)
                if refused is not None:
                    raise refused
                if error is errors.UnknownTopicOrPartitionError:
                    continue  # deleted, or not made yet: nothing of ours is open there
                raise _Retriable(f"Metadata of {t.name}: {error.__name__}")
            for p in t.partitions:
                if p.leader_id < 0:
                    raise _Retriable(f"{t.name}-{p.partition_index} has no leader")
                out[(t.name, p.partition_index)] = int(p.leader_id)
        return out

    def write_markers(self, txns: Sequence[PartitionTransaction], commit: bool) -> None:
        """Write a COMMIT (or ABORT) marker for each open transaction of ``txns`` in its
        partition (``WriteTxnMarkers`` to the partition's leader now, what a coordinator
        sends; Kafka's admin ``abortTransaction`` does the same for an abort). It needs
        ClusterAction on the cluster (``KafkaAccessError`` naming it otherwise)."""
        if txns:
            self._retrying(lambda: self._run(self._write_markers_async, list(txns), commit))

    async def _write_markers_async(self, txns: list[PartitionTransaction], commit: bool) -> None:
        import kafka.errors as errors
        from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

        marker, topic = (
            WriteTxnMarkersRequest.WritableTxnMarker,
            WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic,
        )
        leaders = await self._leaders(sorted({t.topic for t in txns}))
        by_leader: dict[int, list[PartitionTransaction]] = {}
        for txn in txns:
            leader = leaders.get((txn.topic, txn.partition))
            if leader is None:
                continue  # the topic is gone: nothing to end
            by_leader.setdefault(leader, []).append(txn)
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
                    ],
                    max_version=1,
                )
                for t in own
            ]
            responses = await self._send_all(leader, requests)
            for t, response in zip(own, responses, strict=True):
                codes = [
                    p.error_code
                    for m in response.markers
                    for tr in m.topics
                    for p in tr.partitions
                    if p.error_code
                ]
                if not codes:
                    continue
                error = errors.for_code(codes[0])
                where = f"{t.topic}-{t.partition}"
                refused = denied("WriteTxnMarkers", codes[0], where, error.__name__)
                if refused is not None:
                    raise refused
                if error.retriable:
                    self.admin._manager.cluster.request_update()
                    raise _Retriable(f"WriteTxnMarkers in {where}: {error.__name__}")
                raise RuntimeError(
                    f"WriteTxnMarkers({'commit' if commit else 'abort'}) for producer "
                    f"{t.producer_id} in {where} failed with Kafka error {_kafka_name(error)}"
                )


@dataclass(frozen=True)
class _Described:
    """A transaction as described, and the coordinator (broker id) that answered."""

    txn: OpenTransaction
    coordinator: int


# Errors that mean "this transaction is no longer the producer's current one".
def _not_current() -> tuple[Any, ...]:
    import kafka.errors as errors

    return (
        errors.InvalidProducerEpochError,
        errors.InvalidTxnStateError,
        errors.ProducerFencedError,
    )


class _NotCurrent:
    """``x in _NOT_CURRENT``: whether error class ``x`` says the transaction is not its
    producer's current one any more (kafka is imported on first use)."""

    def __contains__(self, error: Any) -> bool:
        return error in _not_current()


_NOT_CURRENT = _NotCurrent()


def _kafka_name(error: Any) -> str:
    """Kafka's name of an error class (``INVALID_PRODUCER_EPOCH``...)."""
    import re

    name = getattr(error, "__name__", str(error))
    base = name[:-5] if name.endswith("Error") else name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", base).upper()


def _refused(exc: BaseException, request: str, resource: str) -> KafkaAccessError | None:
    """A ``KafkaAccessError`` for kafka-python's authentication, authorization or TLS
    verification failures (as raised, or as the cause of a failed connection)."""
    import kafka.errors as errors

    if isinstance(exc, errors.SaslAuthenticationFailedError):
        return KafkaAccessError(
            f"Kafka refused the client's credentials ({exc}): check sasl.jaas.config (or "
            "sasl.username/sasl.password) and sasl.mechanism"
        )
    if isinstance(exc, errors.AuthorizationError):
        return denied(request, type(exc).errno or -1, resource, type(exc).__name__)
    text = str(exc)
    if "SaslAuthenticationFailed" in text or "Authentication failed" in text:
        return KafkaAccessError(
            f"Kafka refused the client's credentials ({text}): check sasl.jaas.config (or "
            "sasl.username/sasl.password) and sasl.mechanism"
        )
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return KafkaAccessError(
            f"TLS to Kafka failed: {text} (check ssl.truststore.* or ssl.ca.location, and "
            "ssl.endpoint.identification.algorithm)"
        )
    return None


class _BootstrapFailures(logging.Handler):
    """The connection failures kafka-python logs (and retries) while it bootstraps, so a
    refused login or certificate ends the wait with its cause."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[BaseException] = []
        self._logger = logging.getLogger("kafka.net.manager")

    def __enter__(self) -> _BootstrapFailures:
        # Ahead of the logger's filters (``throttle_kafka_python``): it sees every record.
        self._logger.filters.insert(0, self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._logger.removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        self.seen.extend(a for a in args if isinstance(a, BaseException))
        if record.levelno >= logging.WARNING:
            self.seen.append(RuntimeError(record.getMessage()))

    def refused(self) -> KafkaAccessError | None:
        """The first failure that was a refused login or certificate, as an error."""
        for exc in self.seen:
            refused = _refused(exc, "connecting", "")
            if refused is not None:
                return refused
        return None


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
