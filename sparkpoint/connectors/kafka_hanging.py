"""Transactions of the exactly-once Kafka sink that a broker left hanging, found and ended.

A transaction is hanging when its coordinator has ended it but a partition it wrote never
got its marker: the partition's last stable offset stays before its first record, so
``read_committed`` consumers read nothing after it, for ever. Kafka 4.4 does this when its
broker is killed between a commit's ``PrepareCommit`` and its markers: restarted, the
coordinator records ``CompleteCommit`` and the partitions get no marker (seen in the
segments of a failing run, with ``DumpLogSegments``; Kafka's code skips, as "likely
deleted", a partition whose leader it cannot find yet, the likely path). Measured here: a
broker SIGKILLed mid-job left one in 2 of 44 runs. Kafka's remedy is
``kafka-transactions.sh`` by hand (it can only abort); Flink's sink does nothing. The sink's
driver runs ``complete_hanging`` after every commit and restore, and writes the marker the
coordinator decided: COMMIT for a committed transaction (a completed checkpoint promised its
records), ABORT for an aborted one. A POOLING id carries one transaction after another, and
its coordinator keeps only the latest's decision: a hanging transaction of one is only
reported (``find_hanging``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sparkpoint.connectors.kafka_transactions import PartitionTransaction, TransactionAdmin

__all__ = ["HangingTransaction", "complete_hanging", "end_hanging", "find_hanging"]

_ENDED = {"CompleteCommit": True, "CompleteAbort": False}


@dataclass(frozen=True)
class HangingTransaction:
    """A transaction its coordinator has ended that one partition still has open;
    ``committed`` is the coordinator's decision (the marker ``complete_hanging`` writes)."""

    transactional_id: str
    open: PartitionTransaction
    committed: bool


def complete_hanging(
    admin: TransactionAdmin, topics: Iterable[str], owns: Callable[[str], bool]
) -> list[HangingTransaction]:
    """Find the transactions of ids ``owns`` accepts hanging in ``topics`` and write each
    one's marker; returns them. Only for ids that never carry a second transaction
    (INCREMENTING's): the coordinator's decision is that of the id's latest transaction.

    Safe against a transaction that is ending or beginning meanwhile: one is hanging only
    when its coordinator had already ended it (``CompleteCommit``/``CompleteAbort``: every
    marker written) at the same producer id and epoch *before* the partition was seen with
    it open, and the coordinator still has that very transaction (same state and start
    time) after."""
    hanging = find_hanging(admin, topics, owns)
    end_hanging(admin, hanging)
    return hanging


def end_hanging(admin: TransactionAdmin, hanging: Iterable[HangingTransaction]) -> None:
    """Write each hanging transaction's marker, as its coordinator decided (needs
    ClusterAction on the cluster: ``KafkaAccessError`` naming it otherwise)."""
    hanging = list(hanging)
    for commit in (True, False):
        txns = [h.open for h in hanging if h.committed is commit]
        if txns:
            admin.write_markers(txns, commit)


def find_hanging(
    admin: TransactionAdmin, topics: Iterable[str], owns: Callable[[str], bool]
) -> list[HangingTransaction]:
    """``complete_hanging``'s transactions, found and not ended (``committed``: what the
    id's latest transaction was)."""
    names = sorted(set(topics))
    seen = admin.open_in_topics(names)
    if not seen:
        return []
    ids = {
        pid: tid
        for pid, tid in admin.transactional_ids(t.producer_id for t in seen).items()
        if owns(tid)
    }
    if not ids:
        return []
    before = admin.describe_all(sorted(set(ids.values())))
    ended = {
        tid for tid, d in before.items() if d.state in _ENDED and d.transaction_start_time_ms >= 0
    }
    if not ended:
        return []
    # Seen again now that the coordinator is known to have ended these: still open means no
    # marker came, since every one was written before the coordinator recorded the end.
    suspects = [
        t
        for t in admin.open_in_topics(names)
        if ids.get(t.producer_id) in ended
        and (t.producer_id, t.producer_epoch)
        == (before[ids[t.producer_id]].producer_id, before[ids[t.producer_id]].producer_epoch)
    ]
    if not suspects:
        return []
    after = admin.describe_all(sorted({ids[t.producer_id] for t in suspects}))
    return [
        HangingTransaction(ids[t.producer_id], t, _ENDED[before[ids[t.producer_id]].state])
        for t in suspects
        if after.get(ids[t.producer_id]) == before[ids[t.producer_id]]
    ]
