"""The progress of a job (Spark's ``ProgressReporter``): its status, counters, epoch reports,
failovers and checkpoint statistics. The job master reports to it; the job client and the
dashboard read the job through its public methods only."""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sparkpoint.checkpoint.stats import CheckpointStats
from sparkpoint.metrics.job_metrics import JobMetrics
from sparkpoint.runtime.driver.changelog_checkpoints import (
    ChangelogCheckpoints,
    MaterializationStats,
)
from sparkpoint.runtime.driver.epoch_checkpoints import EpochCheckpoints
from sparkpoint.runtime.driver.keyed_placement import KeyedOperator, KeyedPlacement
from sparkpoint.runtime.driver.record_latency import PublishedLatency, RecordLatency
from sparkpoint.runtime.driver.reports import EpochReport, FailoverEvent, SubtaskRestoreEvent
from sparkpoint.runtime.driver.settings import JobSettings
from sparkpoint.runtime.protocol import RestoreReason, TaskReport

__all__ = ["TERMINAL_STATUSES", "JobProgress", "JobStatus"]

_LOG = logging.getLogger("sparkpoint.job")
_KEPT_FAILOVERS = 20  # failovers a checkpoint's master state lists (the latest ones)


class JobStatus(enum.StrEnum):
    """Flink's job statuses that a sparkpoint job goes through."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"


TERMINAL_STATUSES = (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)


class JobProgress:
    """What one job has done so far (see the module doc).

    Written by the job master's thread only; the readers (other threads) get copies.
    """

    def __init__(
        self,
        settings: JobSettings,
        checkpoints: EpochCheckpoints,
        changelog: ChangelogCheckpoints,
        placement: KeyedPlacement,
        *,
        commits_on_checkpoint: bool = False,
    ) -> None:
        self._job_id = settings.job_id
        self._job_name = settings.job_name
        self._policy = settings.policy
        self._checkpoints = checkpoints
        self._changelog = changelog
        self._placement = placement
        self._status = JobStatus.CREATED
        self._epochs_run = 0
        self._records_in = 0
        self._restarts = 0
        self._reports: list[EpochReport] = []
        self._failovers: list[FailoverEvent] = []
        self._last_failover: FailoverEvent | None = None
        # (operator id, subtask) -> why it restores alone in the next run
        self._restore_causes: dict[tuple[str, int], str] = {}
        self._lag: Mapping[str, Mapping[str, int]] = {}
        self._epoch_starts: dict[int, float] = {}  # epoch -> when it started (monotonic s)
        self._commit_latency_ms: int | None = None
        # Records count until their epoch's commit with a transactional sink, else its end.
        self._record_latency = RecordLatency(commits_on_checkpoint)
        self._skipped: Mapping[str, Mapping[str, int]] = {}
        self._lock = threading.Lock()
        self._metrics = JobMetrics()

    # -- read by the job client and the dashboard --------------------------------------------
    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job_id

    @property
    def job_name(self) -> str:
        """The job's name."""
        return self._job_name

    @property
    def status(self) -> JobStatus:
        """The job's current status."""
        return self._status

    @property
    def epochs_run(self) -> int:
        """Epochs finished so far."""
        return self._epochs_run

    @property
    def records_in(self) -> int:
        """Records the sources read in finished epochs."""
        return self._records_in

    @property
    def restarts(self) -> int:
        """Whole-job restarts so far."""
        return self._restarts

    @property
    def checkpointing(self) -> bool:
        """Whether periodic checkpoints are on."""
        return self._policy.enabled

    @property
    def checkpoint_interval_ms(self) -> int:
        """The checkpoint interval (-1: periodic checkpoints disabled)."""
        return self._policy.interval_ms

    def epoch_reports(self) -> list[EpochReport]:
        """Every finished epoch's report, in order."""
        with self._lock:
            return list(self._reports)

    def consumer_lag(self) -> dict[str, dict[str, int]]:
        """Source operator id -> split id -> records available and not yet read, after the
        latest epoch (Kafka's consumer lag per partition; empty before the first epoch)."""
        with self._lock:
            return {op: dict(by_split) for op, by_split in self._lag.items()}

    def records_skipped(self) -> dict[str, dict[str, int]]:
        """Source operator id -> split id -> records skipped unread so far, because the
        input no longer held them (Kafka with ``sparkpoint.skip-deleted-records``)."""
        with self._lock:
            return {op: dict(by_split) for op, by_split in self._skipped.items()}

    def failovers(self) -> list[FailoverEvent]:
        """The whole-job failovers so far."""
        with self._lock:
            return list(self._failovers)

    def checkpoint_stats(self) -> list[CheckpointStats]:
        """Per checkpoint (and savepoint) triggered: its statistics (copies)."""
        return self._checkpoints.statistics()

    def materializations(self) -> list[MaterializationStats]:
        """Background materializations adopted (changelog checkpoints), in order."""
        return list(self._changelog.adopted)

    @property
    def metrics(self) -> JobMetrics:
        """The operators' system and user metrics, as accepted runs reported them."""
        return self._metrics

    def keyed_operators(self) -> list[KeyedOperator]:
        """Every keyed operator and the executor each of its subtasks is placed on."""
        return self._placement.keyed_operators()

    # -- reported by the job master ----------------------------------------------------------
    def set_status(self, status: JobStatus) -> None:
        """The job moved to ``status``."""
        self._status = status

    @property
    def commit_latency_ms(self) -> int | None:
        """Milliseconds from the start of the newest epoch the latest sink commit covered
        to that commit (None before the first): the least time a committed record spent
        between its source and its publication."""
        return self._commit_latency_ms

    @property
    def record_latency(self) -> PublishedLatency | None:
        """The end-to-end latency of the records the latest publication made visible
        (None before the first): ``record_latency.py``."""
        return self._record_latency.latest

    def emit_event_time_lags(self) -> dict[str, dict[int, int]]:
        """Source operator id -> subtask -> Flink's ``currentEmitEventTimeLag`` (ms; -1
        for records without a timestamp)."""
        return self._record_latency.emit_lags()

    def records_published(self, epoch: int) -> None:
        """A sink commit made the output of every epoch up to ``epoch`` visible."""
        self._record_latency.published(epoch)

    def epoch_started(self, epoch: int) -> None:
        """``epoch`` starts now: its ranges are planned, so its records are in the source."""
        self._epoch_starts[epoch] = time.monotonic()
        if len(self._epoch_starts) > 10_000:  # epochs never committed (no checkpoint yet)
            del self._epoch_starts[min(self._epoch_starts)]

    def sink_committed(self, epoch: int) -> None:
        """A sink commit published the output staged up to ``epoch``."""
        started = self._epoch_starts.get(epoch)
        if started is not None:
            self._commit_latency_ms = int((time.monotonic() - started) * 1000)
        for e in [e for e in self._epoch_starts if e <= epoch]:
            del self._epoch_starts[e]

    def epoch_accepted(self, records_in: int) -> None:
        """An epoch's run was accepted; its sources read ``records_in`` records."""
        self._epochs_run += 1
        self._records_in += records_in

    def restarted(self) -> None:
        """The job restarts as a whole (the restart strategy allowed it)."""
        self._restarts += 1

    def failed_over(self, event: FailoverEvent) -> None:
        """The job rolled back as ``event`` says (the next epoch report names it)."""
        with self._lock:
            self._failovers.append(event)
        self._last_failover = event
        self._restore_causes.clear()
        self._record_latency.discard_pending()

    def subtask_restore_planned(self, operator_id: str, subtask: int, cause: str) -> None:
        """``subtask`` of ``operator_id`` restores alone in the next run, because ``cause``."""
        self._restore_causes[(operator_id, subtask)] = cause

    def epoch_finished(
        self,
        epoch: int,
        reports: Sequence[TaskReport],
        keyed: Sequence[TaskReport],
        on_preferred: int,
        source_stages: frozenset[int],
        *,
        runs: int,
        seconds: float,
        checkpoint_id: int | None,
        uploads: tuple[int, int],
        lag: Mapping[str, Mapping[str, int]] | None = None,
        skipped: Mapping[str, Mapping[str, int]] | None = None,
    ) -> EpochReport:
        """Record (and log) the report of a finished epoch. ``keyed`` are the keyed tasks'
        reports, ``on_preferred`` how many ran where placed, ``uploads`` the asynchronous
        uploads still running and completed in the epoch, ``lag`` every source split's
        records not yet read after it (source operator id -> split id -> records),
        ``skipped`` the records sources skipped unread so far (the same keys)."""
        restores = tuple(
            SubtaskRestoreEvent(
                epoch,
                done.operator_id,
                done.subtask,
                r.executor.executor_id,
                self._restore_causes.pop((done.operator_id, done.subtask), "state lost"),
                done.changelog_entries,
                done.seconds,
            )
            for r in keyed
            for done in r.restored
            if done.reason == RestoreReason.SUBTASK
        )
        self._restore_causes.clear()
        self._metrics.run_accepted(r.metrics for r in reports if r.metrics is not None)
        self._record_latency.epoch_accepted(
            epoch,
            ((r.subtask, r.record_times) for r in reports if r.record_times is not None),
        )
        report = EpochReport(
            epoch=epoch,
            runs=runs,
            seconds=seconds,
            records_in=sum(r.records_in for r in reports if r.stage in source_stages),
            keyed_tasks=len(keyed),
            on_preferred_executor=on_preferred,
            subtask_restores=restores,
            failover=self._last_failover,
            checkpoint_id=checkpoint_id,
            uploads_in_flight=uploads[0],
            uploads_completed=uploads[1],
            changelog_bytes=sum(
                a.size for r in reports for a in r.changelogs if a.handle is not None
            ),
            consumer_lag={op: dict(by_split) for op, by_split in (lag or {}).items()},
        )
        self._last_failover = None
        with self._lock:
            self._reports.append(report)
            self._lag = report.consumer_lag
            self._skipped = {op: dict(by_split) for op, by_split in (skipped or {}).items()}
        _LOG.info("Job %s %s", self._job_id, report.describe())
        return report

    def recovery_since(self, checkpointed_epoch: int) -> dict[str, Any]:
        """What a checkpoint's master state lists of the job's recovery: the epochs after
        ``checkpointed_epoch`` (the previous checkpoint's) and the latest failovers."""
        with self._lock:
            return {
                "epochs": [e.to_json() for e in self._reports if e.epoch > checkpointed_epoch],
                "failovers": [dataclasses.asdict(f) for f in self._failovers[-_KEPT_FAILOVERS:]],
            }
