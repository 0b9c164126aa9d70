"""The exactly-once Kafka sink's committables, checked as input from outside.

A committable names a transaction to commit: ``transactional_id``, ``producer_id``,
``producer_epoch``, the ``topics`` it wrote and ``transaction_start_time_ms`` (the
coordinator's clock when it began; absent in committables of older checkpoints, which are
committed without the check it allows). A checkpoint's ``_metadata`` carries the
uncommitted ones; on restore they are committed on its word, so each is checked before any
Kafka call: the id must be one of this sink's (``<prefix>-<subtask>-<n>``, ASCII digits),
the producer id and epoch in Kafka's ranges, the start time an int >= -1, the topics legal
Kafka topic names, the sink's own when it writes to a fixed topic, and, with a topic
selector, named by a snapshot the job trusts (its own or signed: the job's record of the
topics it wrote).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sparkpoint.connectors.kafka_transactions import OpenTransaction
from sparkpoint.errors import MetadataFormatError

__all__ = ["checked_transactions", "transactional_id_pattern"]

_MAX_EPOCH = 32767  # a producer epoch is a Java short
_FIELDS = ("transactional_id", "producer_id", "producer_epoch", "topics")
_START = "transaction_start_time_ms"
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's legal topic names


def transactional_id_pattern(prefix: str) -> re.Pattern[str]:
    """The transactional ids of the sink with ``prefix``: ``<prefix>-<subtask>-<n>``, numbers
    of ASCII digits only (``\\d`` would take any Unicode digit)."""
    return re.compile(re.escape(prefix) + r"-([0-9]+)-([0-9]+)")


def checked_transactions(
    committables: Sequence[Any],
    prefix: str,
    topic: str | None,
    where: str,
    *,
    topics_known: bool = True,
) -> list[OpenTransaction]:
    """The transactions ``committables`` name, each checked (``MetadataFormatError`` naming
    ``where``, the field and its value otherwise); ``topic`` is the sink's fixed topic, if
    it has one. A sink with a topic selector knows the topics it wrote only from its own
    records: ``topics_known`` false (a snapshot that is neither the job's own nor signed)
    refuses any topic such a sink's committable names."""
    own = transactional_id_pattern(prefix)
    out = []
    for i, c in enumerate(committables):
        field = f"committable {i}"
        if not isinstance(c, dict) or sorted(k for k in c if k != _START) != sorted(_FIELDS):
            raise _refuse(
                where,
                field,
                c,
                f"is not a mapping of exactly {', '.join(_FIELDS)} (and optionally {_START})",
            )
        tid, pid, epoch, topics = (c[f] for f in _FIELDS)
        # Absent in an older checkpoint's committable: -1, ended without the start check.
        start = c.get(_START, -1)
        if not isinstance(tid, str) or own.fullmatch(tid) is None:
            raise _refuse(
                where,
                f"{field} transactional_id",
                tid,
                f"is not a transactional id of this sink ({prefix}-<subtask>-<n>)",
            )
        if not _is_int(pid) or pid < 0:
            raise _refuse(where, f"{field} producer_id", pid, "is not a producer id")
        if not _is_int(epoch) or not 0 <= epoch <= _MAX_EPOCH:
            raise _refuse(where, f"{field} producer_epoch", epoch, "is not a producer epoch")
        if not _is_int(start) or start < -1:
            raise _refuse(where, f"{field} {_START}", start, "is not a start time in ms (>= -1)")
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
            raise _refuse(where, f"{field} topics", topics, "is not a list of topic names")
        for name in topics:
            if _TOPIC.fullmatch(name) is None or name in (".", ".."):
                raise _refuse(where, f"{field} topics", name, "is not a Kafka topic name")
        foreign = [t for t in topics if topic is not None and t != topic]
        if foreign:
            raise _refuse(
                where, f"{field} topics", foreign[0], f"is not this sink's topic {topic!r}"
            )
        if topic is None and topics and not topics_known:
            raise _refuse(
                where,
                f"{field} topics",
                topics[0],
                "is a topic of a sink with a topic selector, named by an untrusted snapshot: "
                "not one the job is known to have written",
            )
        out.append(OpenTransaction(tid, pid, epoch, "", start))
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refuse(where: str, field: str, value: Any, reason: str) -> MetadataFormatError:
    return MetadataFormatError(
        f"Refusing the Kafka sink's {field} {value!r} in {where}: it {reason}. A restored "
        "snapshot's sink commits must name transactions this sink wrote."
    )
