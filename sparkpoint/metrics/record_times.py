"""The times of the records a source task read in one epoch, as a few aggregates: count,
oldest, newest and sum of their timestamps (Kafka's record timestamps; the time the task
read them for records without one), and Flink's ``currentEmitEventTimeLag`` of the task.

A source task folds each batch in with the builtins ``min``/``max``/``sum`` over the
batch's timestamp list (loops in C, no Python code per record); the driver merges the
tasks' aggregates per epoch and turns them into end-to-end latencies when the commit that
publishes the epoch lands (``runtime/driver/record_latency.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

__all__ = ["RecordTimes", "RecordTimesAccumulator", "SourceRecordTimes", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """Milliseconds since the epoch by this host's wall clock (what Kafka's timestamps
    count)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class RecordTimes:
    """Aggregates of some records' timestamps (ms since the epoch). ``ingestion``: how
    many of the ``count`` records had no timestamp of their own and count from the time
    their source task read them."""

    count: int
    min_ms: int
    max_ms: int
    sum_ms: int
    ingestion: int = 0

    def merge(self, other: RecordTimes) -> RecordTimes:
        """The aggregates of both sets of records."""
        return RecordTimes(
            self.count + other.count,
            min(self.min_ms, other.min_ms),
            max(self.max_ms, other.max_ms),
            self.sum_ms + other.sum_ms,
            self.ingestion + other.ingestion,
        )

    @staticmethod
    def merge_all(items: Iterable[RecordTimes | None]) -> RecordTimes | None:
        """The aggregates of every item's records (None: no records at all)."""
        out: RecordTimes | None = None
        for item in items:
            if item is not None and item.count:
                out = item if out is None else out.merge(item)
        return out


@dataclass(frozen=True)
class SourceRecordTimes:
    """What one source task reports of its records' times for one epoch.

    ``emit_lag_ms`` is Flink's ``currentEmitEventTimeLag``: when the task emitted the last
    record that carried a timestamp, less that timestamp (None: no record carried one,
    Flink's UNDEFINED)."""

    operator_id: str
    times: RecordTimes | None
    emit_lag_ms: int | None = None


class RecordTimesAccumulator:
    """Folds in the batches a source task emits (one call per batch, before the batch is
    pushed on, as Flink's ``recordEmitted``)."""

    def __init__(self, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._clock_ms = clock_ms
        self._times: RecordTimes | None = None
        self._emit_lag: int | None = None

    def add(self, timestamps: list[int | None] | None, count: int) -> None:
        """A batch of ``count`` records with ``timestamps`` (None: none carries one)."""
        if count <= 0:
            return
        now = self._clock_ms()
        if timestamps is None:
            batch = RecordTimes(count, now, now, now * count, count)
        else:
            try:
                # A None among them makes sum() raise: the builtins stay loops in C.
                stamps = cast("list[int]", timestamps)
                batch = RecordTimes(count, min(stamps), max(stamps), sum(stamps))
            except TypeError:  # some records carry no timestamp: they count from now
                own = [t for t in timestamps if t is not None]
                missing = count - len(own)
                batch = RecordTimes(
                    count, min([*own, now]), max([*own, now]), sum(own) + now * missing, missing
                )
            last = timestamps[-1]
            if last is not None:
                self._emit_lag = now - last
        self._times = batch if self._times is None else self._times.merge(batch)

    def result(self, operator_id: str) -> SourceRecordTimes:
        """The task's report for the source operator ``operator_id``."""
        return SourceRecordTimes(operator_id, self._times, self._emit_lag)
