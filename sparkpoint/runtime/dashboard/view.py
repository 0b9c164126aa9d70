"""``JobView``: a consistent copy of what the dashboard shows about a running job.

Taken from the job's progress while the job runs (the master's thread keeps appending;
copies of its lists are taken, never the lists themselves), so the page and its JSON
describe one moment.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.stats import CheckpointStats
from sparkpoint.metrics.sample import MetricValue
from sparkpoint.runtime.driver.metric_values import metric_values
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.reports import EpochReport, FailoverEvent, SubtaskRestoreEvent

__all__ = ["JobView", "OperatorView", "RateMeter", "job_view"]

_RATE_WINDOW_S = 10.0


@dataclass(frozen=True)
class OperatorView:
    """A keyed operator: its parallelism and the executor each subtask is placed on."""

    operator_id: str
    name: str
    parallelism: int
    executors: tuple[str, ...]


@dataclass(frozen=True)
class JobView:
    """The job at one moment (everything the page shows)."""

    job_name: str
    job_id: str
    status: str
    uptime_s: float
    epochs: int
    records_in: int
    restarts: int
    epochs_per_s: float
    records_per_s: float
    checkpoints: tuple[CheckpointStats, ...]
    epoch_reports: tuple[EpochReport, ...]
    failovers: tuple[FailoverEvent, ...]
    operators: tuple[OperatorView, ...]
    checkpointing: bool
    interval_ms: int
    refresh_ms: int = 2000
    subtask_restores: tuple[SubtaskRestoreEvent, ...] = field(default=())
    metrics: tuple[MetricValue, ...] = field(default=())
    # source operator id -> split -> records not yet read after the latest epoch
    consumer_lag: dict[str, dict[str, int]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Flink's checkpoint counts: triggered, in progress, completed, failed, restored."""
        statuses = [s.status for s in self.checkpoints]
        return {
            "triggered": len(statuses),
            "in_progress": statuses.count("IN_PROGRESS"),
            "completed": statuses.count("COMPLETED"),
            "failed": statuses.count("FAILED"),
            "restored": len(self.failovers) + len(self.subtask_restores),
        }

    def to_json(self) -> dict[str, Any]:
        """The view as JSON (``/api/job``)."""
        return {
            "job_name": self.job_name,
            "job_id": self.job_id,
            "status": self.status,
            "uptime_s": round(self.uptime_s, 3),
            "epochs": self.epochs,
            "records_in": self.records_in,
            "restarts": self.restarts,
            "epochs_per_s": round(self.epochs_per_s, 3),
            "records_per_s": round(self.records_per_s, 1),
            "counts": self.counts(),
            "checkpoints": [s.to_json() for s in self.checkpoints],
            "failovers": [
                {
                    "epoch": f.epoch,
                    "incarnation": f.incarnation,
                    "checkpoint_id": f.checkpoint_id,
                    "cause": f.cause,
                }
                for f in self.failovers
            ],
            "subtask_restores": [
                {
                    "epoch": r.epoch,
                    "operator_id": r.operator_id,
                    "subtask": r.subtask,
                    "executor_id": r.executor_id,
                    "cause": r.cause,
                    "changelog_epochs": r.changelog_entries,
                    "seconds": round(r.seconds, 3),
                }
                for r in self.subtask_restores
            ],
            "consumer_lag": {op: dict(lag) for op, lag in self.consumer_lag.items()},
            "operators": [
                {
                    "operator_id": o.operator_id,
                    "name": o.name,
                    "parallelism": o.parallelism,
                    "executors": list(o.executors),
                }
                for o in self.operators
            ],
            "metrics": {m.identifier: m.value for m in self.metrics},
        }


class RateMeter:
    """Epochs and records per second over the last ten seconds (or since the start, when
    the job is younger), from samples of the job's counters."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int, int]] = deque()

    def sample(self, epochs: int, records: int) -> None:
        """Record the counters now (the dashboard does so every second)."""
        now = time.monotonic()
        self._samples.append((now, epochs, records))
        while len(self._samples) > 2 and now - self._samples[1][0] >= _RATE_WINDOW_S:
            self._samples.popleft()

    def rates(self, epochs: int, records: int) -> tuple[float, float]:
        """Add a sample; the rates since the oldest sample within the window."""
        self.sample(epochs, records)
        now, _, _ = self._samples[-1]
        t0, e0, r0 = self._samples[0]
        span = now - t0
        if span <= 0:
            return 0.0, 0.0
        return (epochs - e0) / span, (records - r0) / span


def job_view(progress: JobProgress, started: float, meter: RateMeter, refresh_ms: int) -> JobView:
    """The view of the job whose ``progress`` is given, now; ``started`` is its
    ``time.monotonic`` start."""
    epochs, records = progress.epochs_run, progress.records_in
    epochs_per_s, records_per_s = meter.rates(epochs, records)
    reports = tuple(progress.epoch_reports())
    operators = tuple(
        OperatorView(op.operator_id, op.name, op.parallelism, tuple(e or "-" for e in op.executors))
        for op in progress.keyed_operators()
    )
    return JobView(
        job_name=progress.job_name,
        job_id=progress.job_id,
        status=progress.status,
        uptime_s=time.monotonic() - started,
        epochs=epochs,
        records_in=records,
        restarts=progress.restarts,
        epochs_per_s=epochs_per_s,
        records_per_s=records_per_s,
        checkpoints=tuple(progress.checkpoint_stats()),
        epoch_reports=reports,
        failovers=tuple(progress.failovers()),
        operators=operators,
        checkpointing=progress.checkpointing,
        interval_ms=progress.checkpoint_interval_ms,
        refresh_ms=refresh_ms,
        subtask_restores=tuple(r for e in reports for r in e.subtask_restores),
        metrics=tuple(metric_values(progress)),
        consumer_lag=progress.consumer_lag(),
    )
