"""End-to-end latency of the records a job published: from each record's source timestamp
(``metrics/record_times.py``) to the driver's wall clock when the output of the record's
epoch became visible. With a transactional sink that is the sink commit covering the epoch
(the checkpoint's completion, or the epoch's end under AT_LEAST_ONCE or without
checkpoints); with only non-transactional sinks (print, collect, a Kafka sink without
EXACTLY_ONCE) it is the epoch's end, when their output was flushed.

The source tasks' aggregates of each accepted epoch wait here until then; the latest
publication's figures are the ``sparkpoint.lastCommitRecordLatency*`` gauges. The source
tasks' ``currentEmitEventTimeLag`` is kept per source subtask, as its latest run left it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sparkpoint.metrics.record_times import RecordTimes, SourceRecordTimes, wall_clock_ms

__all__ = ["PublishedLatency", "RecordLatency"]

_MAX_PENDING_EPOCHS = 10_000  # epochs never published (no checkpoint completes)


@dataclass(frozen=True)
class PublishedLatency:
    """The latency of the records one publication made visible (ms): of the oldest, the
    mean and the newest record; ``records`` counts them, ``ingestion`` those measured
    from the time their source task read them (they carried no timestamp)."""

    max_ms: int
    mean_ms: int
    min_ms: int
    records: int
    ingestion: int

    @staticmethod
    def at(now_ms: int, times: RecordTimes) -> PublishedLatency:
        """The latency at ``now_ms`` of records whose timestamps ``times`` aggregates."""
        return PublishedLatency(
            now_ms - times.min_ms,
            now_ms - round(times.sum_ms / times.count),
            now_ms - times.max_ms,
            times.count,
            times.ingestion,
        )


class RecordLatency:
    """The driver's bookkeeping of record times (see the module doc). ``at_commit``: the
    job has a transactional sink, so an epoch's records count until its commit; else until
    the epoch's end. Written by the job master's thread only."""

    def __init__(self, at_commit: bool, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._at_commit = at_commit
        self._clock_ms = clock_ms
        self._pending: dict[int, RecordTimes] = {}
        self._emit_lags: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()  # emit lags are read by other threads
        # The newest epoch a commit made visible, when, and the record times it covered: a
        # checkpoint that completes while its own epoch is being accepted commits before
        # that epoch's record times arrive here; they join that commit's, from its time.
        self._published_epoch = -1
        self._published_ms = 0
        self._published_times: RecordTimes | None = None
        self.latest: PublishedLatency | None = None

    def epoch_accepted(self, epoch: int, sources: Iterable[tuple[int, SourceRecordTimes]]) -> None:
        """The accepted run of ``epoch`` read what ``sources`` report (per source task: its
        subtask and its record times); without a transactional sink they are published
        now, the epoch's sinks having flushed."""
        reports = list(sources)
        with self._lock:
            for subtask, report in reports:
                key = (report.operator_id, subtask)
                if report.emit_lag_ms is not None:
                    self._emit_lags[key] = report.emit_lag_ms
                else:
                    self._emit_lags.setdefault(key, -1)
        times = RecordTimes.merge_all(r.times for _s, r in reports)
        if times is not None:
            self._pending[epoch] = times
            if len(self._pending) > _MAX_PENDING_EPOCHS:
                del self._pending[min(self._pending)]
        if not self._at_commit:
            self.published(epoch)
        elif epoch <= self._published_epoch and times is not None:
            self._pending.pop(epoch, None)
            merged = RecordTimes.merge_all([self._published_times, times])
            assert merged is not None
            self._published_times = merged
            self.latest = PublishedLatency.at(self._published_ms, merged)

    def published(self, epoch: int) -> None:
        """The output of every epoch up to ``epoch`` is visible now (a sink commit)."""
        now_ms = self._clock_ms()
        due = [e for e in self._pending if e <= epoch]
        times = RecordTimes.merge_all(self._pending.pop(e) for e in due)
        if epoch >= self._published_epoch:
            self._published_epoch, self._published_ms = epoch, now_ms
            self._published_times = times
        if times is not None:
            self.latest = PublishedLatency.at(now_ms, times)

    def discard_pending(self) -> None:
        """A rollback: the epochs not published yet never will be (their records are read
        again in later epochs, after the restored checkpoint's)."""
        self._pending.clear()
        self._published_epoch = -1
        self._published_times = None

    def emit_lags(self) -> dict[str, dict[int, int]]:
        """Source operator id -> subtask -> ``currentEmitEventTimeLag`` (ms; -1 when its
        records carry no timestamp, as Flink's UNDEFINED)."""
        out: dict[str, dict[int, int]] = {}
        with self._lock:
            lags = sorted(self._emit_lags.items())
        for (op, subtask), lag in lags:
            out.setdefault(op, {})[subtask] = lag
        return out
