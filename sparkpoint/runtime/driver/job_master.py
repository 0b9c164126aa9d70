"""The job master on the driver: the epoch loop, the job client's requests, and the runs of
each epoch.

Per epoch it plans a bounded range of every source split, runs one Spark job (again, when a
subtask lost its state or executors were lost) and accepts its results; a checkpoint
attached to the epoch then completes (``_metadata`` written, sinks committed up to that
epoch). On failure it applies the restart strategy and restores every subtask from the
latest completed checkpoint (a new *incarnation*): sources rewind, uncommitted output is
aborted. Its parts: ``SourceCoordinator`` (source planning), ``EpochCheckpoints``
(checkpoints), ``JobRestore`` (start and failover), ``KeyedPlacement`` and
``SubtaskRestores`` (where keyed subtasks run and restore alone), ``JobProgress`` (what the
job client and the dashboard read).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.store import CompletedCheckpoint
from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.connectors.source import SplitEnumerator, SplitRange
from sparkpoint.errors import (
    CheckpointFailureReason,
    JobExecutionError,
    SparkpointError,
    StateLostError,
)
from sparkpoint.runtime.driver.changelog_checkpoints import ChangelogCheckpoints
from sparkpoint.runtime.driver.epoch_checkpoints import EpochCheckpoints
from sparkpoint.runtime.driver.epoch_pacing import EpochPacer
from sparkpoint.runtime.driver.failover import JobRestore
from sparkpoint.runtime.driver.job_requests import ClientRequest, RequestKind, RequestQueue
from sparkpoint.runtime.driver.keyed_placement import KeyedPlacement
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.pending_checkpoint import PendingCheckpoint
from sparkpoint.runtime.driver.progress import TERMINAL_STATUSES, JobProgress, JobStatus
from sparkpoint.runtime.driver.reports import EpochStart
from sparkpoint.runtime.driver.settings import JobSettings, ServerSettings
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.driver.source_coordinator import SourceCoordinator
from sparkpoint.runtime.driver.start_state import StartState
from sparkpoint.runtime.driver.subtask_recovery import SubtaskRecovery
from sparkpoint.runtime.driver.subtask_restores import SubtaskRestores
from sparkpoint.runtime.driver.task_specs import TaskSpecs
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import TaskReport
from sparkpoint.runtime.spark.auto_mode import AutoRunner, job_ended, job_started
from sparkpoint.runtime.spark.epoch import EpochRunner, ExecutorsLost
from sparkpoint.runtime.spark.long_running import LongRunningRunner
from sparkpoint.runtime.task.executor import DRIVER_EXECUTOR_ID

__all__ = ["JobMaster"]

_LOG = logging.getLogger("sparkpoint.job")
_MAX_RUNS_PER_EPOCH = 10  # Spark jobs one epoch may take before the job fails over


@dataclass
class _AcceptedRun:
    """The run of an epoch whose results the job goes on with."""

    reports: list[TaskReport]
    preferred: dict[tuple[int, int], str | None]  # where each keyed subtask was placed
    pending: PendingCheckpoint | None  # the checkpoint it snapshot into
    runs: int  # Spark jobs the epoch took
    stop_request: ClientRequest | None  # the savepoint or stop request it served
    drain: bool  # whether it advanced the watermark to the end of event time


class _StoppedWithSavepoint(Exception):
    """The loop ends because a stop-with-savepoint finished the job."""


class JobMaster:
    """Runs one job to its end (FINISHED, CANCELED or FAILED).

    ``clock`` decides checkpoint intervals and timeouts, restart delays, idle epochs and the
    processing time every epoch's tasks see (read once per epoch, shipped in the spec).
    """

    def __init__(
        self, spark: Any, plan: Plan, settings: JobSettings, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._s = settings
        self._clock = clock
        self._job_id = settings.job_id
        self._requests = RequestQueue()
        self._epoch = 0
        self._incarnation = 0
        self._run_id = 0  # Spark jobs run so far (every run of every epoch)
        self._accepted_run: int | None = None  # the run whose results the last epoch used
        self._start = StartState()
        self._sink_commits = SinkCommits(
            {n.operator_id: n.sink for n in plan.sinks},
            committed=lambda epoch: self._progress.sink_committed(epoch),
            covered=lambda epoch: self._progress.records_published(epoch),
        )
        runners = {"auto": AutoRunner, "long-running": LongRunningRunner, "job": EpochRunner}
        self._runner: EpochRunner | LongRunningRunner | AutoRunner = runners[settings.epoch_mode](
            spark, plan, settings.tasks_per_core, settings.max_records_per_split
        )
        self._placement = KeyedPlacement(self._job_id, plan)
        self._changelog = ChangelogCheckpoints(
            plan,
            settings.changelog_checkpoints and settings.policy.enabled,
            settings.materialize_interval_ms if settings.periodic_materialization else None,
            settings.state_backend.keyed_backend_name(),
            settings.materialization_failures_allowed,
        )
        self._recovery = SubtaskRecovery(
            plan,
            settings.explicit_max_parallelism,
            enabled=settings.changelog and settings.policy.enabled,
            hand_over=self._changelog.enabled,
        )
        self._sources = SourceCoordinator(plan, settings.parallelism, clock)
        self._checkpoints = EpochCheckpoints(
            self._job_id,
            plan,
            settings,
            self._changelog,
            self._recovery,
            self._sink_commits,
            clock,
            self._sources.notify_checkpoint_complete,
        )
        self._specs = TaskSpecs(
            plan,
            settings,
            self._checkpoints,
            self._changelog,
            self._recovery.enabled,
            clock,
            self._sources.idleness,
        )
        self._progress = JobProgress(
            settings,
            self._checkpoints,
            self._changelog,
            self._placement,
            commits_on_checkpoint=self._sink_commits.transactional,
        )
        self._subtask_restores = SubtaskRestores(self._job_id, plan, self._recovery, self._progress)
        self._restore = JobRestore(
            plan,
            settings,
            clock,
            self._checkpoints,
            self._sources,
            self._sink_commits,
            self._recovery,
            self._changelog,
            self._progress,
        )
        self._pacer = EpochPacer(plan, settings, clock)

    # -- read by the job client, the dashboard and tools ---------------------------------------
    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job_id

    @property
    def status(self) -> JobStatus:
        """The job's current status."""
        return self._progress.status

    @property
    def progress(self) -> JobProgress:
        """What the job has done so far (epoch reports, counters, checkpoint statistics)."""
        return self._progress

    @property
    def server_settings(self) -> ServerSettings:
        """What to serve for the job, and where (dashboard, REST API, ``/metrics``)."""
        return self._s.server

    @property
    def job_name(self) -> str:
        """The job's name."""
        return self._s.job_name

    def split_enumerators(self) -> dict[str, SplitEnumerator]:
        """Source operator id -> its split enumerator (splits and positions)."""
        return self._sources.enumerators()

    def request(self, kind: str, target: str | None = None, drain: bool = False) -> Future[Any]:
        """Queue a savepoint, stop-with-savepoint or cancel; handled at the next epoch end."""
        return self._requests.put(kind, target, drain)

    # -- running -------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run the job to its end; returns the accumulated result statistics."""
        self._progress.set_status(JobStatus.RUNNING)
        started = time.perf_counter()
        application = self._runner.cluster.application_id
        job_started(application, self._job_id)  # the auto epoch mode of other jobs asks
        try:
            self._checkpoints.initialize_storage()
            self._restored(self._restore.initial())
            self._loop()
        except BaseException:
            if self.status not in TERMINAL_STATUSES:
                self._progress.set_status(JobStatus.FAILED)
            self._requests.fail_all(self._job_id, self.status)
            raise
        finally:
            self._recovery.close()
            self._changelog.close()
            self._checkpoints.close()
            self._cleanup_local_state()
            job_ended(application, self._job_id)
        return {
            "job_id": self._job_id,
            "status": self.status,
            "net_runtime_ms": int((time.perf_counter() - started) * 1000),
            "epochs": self._progress.epochs_run,
            "restarts": self._progress.restarts,
            "records_in": self._progress.records_in,
        }

    def _loop(self) -> None:
        """Run epochs (one request handled before each) until the job ends."""
        while True:
            request = self._requests.take()
            if request is not None and request.kind == RequestKind.CANCEL:
                request.future.set_result(None)
                self._terminate(JobStatus.CANCELED)
                return
            try:
                finished = self._run_one_epoch(request)
            except _StoppedWithSavepoint:
                return
            except Exception as exc:
                if self._failover_until_restored(exc):
                    return
                continue
            if finished:
                self._terminate(JobStatus.FINISHED, commit=True)
                return

    def _run_one_epoch(self, stop_request: ClientRequest | None) -> bool:
        """Run the next epoch (unless it is not time yet); whether it ended the input."""
        planned_at_ms = self._clock.monotonic_ms()
        ranges = self._sources.plan_epoch(self._s.max_records_per_split)
        end_of_input = self._sources.end_of_input(ranges)
        if self._waits(ranges, end_of_input, stop_request):
            return False
        self._epoch += 1
        self._pacer.epoch_started(planned_at_ms)
        self._progress.epoch_started(self._epoch)
        t0 = time.perf_counter()
        run = self._run_until_accepted(ranges, end_of_input, stop_request, planned_at_ms)
        completed = self._accept(run, ranges, time.perf_counter() - t0)
        if run.stop_request is not None and run.stop_request.kind == RequestKind.STOP:
            self._end_stop(completed, run.drain)
        return end_of_input

    def _waits(
        self,
        ranges: dict[int, list[SplitRange]],
        end_of_input: bool,
        stop_request: ClientRequest | None,
    ) -> bool:
        """Whether the epoch waits (``epoch_pacing.py``): then the driver sleeps until the
        pacer's time, or until a client request arrives, and plans again."""
        if end_of_input or stop_request is not None or self._start.restore:
            return False
        self._pacer.runs_long_running(self._runner.long_running)
        wait_s = self._pacer.wait_s(
            ranges,
            checkpoint_due=self._checkpoints.is_due(),
            checkpointed_epoch=self._checkpoints.checkpointed_epoch,
            uploads_pending=bool(self._checkpoints.pending_ids()),
        )
        if wait_s <= 0:
            return False
        self._requests.wait(wait_s)
        return True

    def _run_until_accepted(
        self,
        ranges: dict[int, list[SplitRange]],
        end_of_input: bool,
        stop_request: ClientRequest | None,
        planned_at_ms: int,
    ) -> _AcceptedRun:
        """Run the epoch (its ranges read at ``planned_at_ms``) until a run's results can be
        used: runs where a subtask lost its state are discarded (the subtask restores alone),
        lost executors run it again."""
        runs = 0
        while True:
            runs += 1
            pending = self._checkpoints.trigger(
                self._epoch, stop_request, end_of_input, planned_at_ms
            )
            if stop_request is not None and stop_request.future.done():
                stop_request = None  # its savepoint failed to trigger: no drain, no stop
            drain = stop_request is not None and stop_request.drain
            try:
                reports, preferred = self._run_once(ranges, end_of_input or drain, pending)
                lost = [lost for r in reports for lost in r.lost]
                if not lost:
                    return _AcceptedRun(reports, preferred, pending, runs, stop_request, drain)
                self._discard_run(reports, pending)
                if runs > _MAX_RUNS_PER_EPOCH or not self._subtask_restores.after_lost(
                    lost, self._start
                ):
                    first = lost[0]
                    raise StateLostError(
                        f"Subtask {first.subtask} of operator {first.operator_id} found "
                        f"{first.detail}; the job restores from the latest checkpoint."
                    )
            except ExecutorsLost as exc:
                _LOG.warning(
                    "Job %s epoch %d: %s; running it again", self._job_id, self._epoch, exc
                )
                self._checkpoints.abort_run(pending, str(exc))
                if runs > _MAX_RUNS_PER_EPOCH:
                    self._requeue(stop_request)
                    raise
            except BaseException:
                if pending is not None:
                    self._checkpoints.abort_all(CheckpointFailureReason.TASK_FAILURE)
                self._requeue(stop_request)
                raise

    def _requeue(self, stop_request: ClientRequest | None) -> None:
        if stop_request is not None:
            self._requests.requeue(stop_request)  # retry after the restore

    def _run_once(
        self,
        ranges: dict[int, list[SplitRange]],
        end_of_input: bool,
        pending: PendingCheckpoint | None,
    ) -> tuple[list[TaskReport], dict[tuple[int, int], str | None]]:
        """One Spark job for the epoch; returns the reports and where each keyed subtask
        was meant to run."""
        moves = self._placement.update(self._runner.cluster.live_executors())
        self._subtask_restores.after_moves(moves, self._start)
        self._run_id += 1
        if self._s.faults is not None:
            self._s.faults.before_epoch(
                EpochStart(
                    self._job_id, self._epoch, self._run_id, self._placement.operator_executors()
                )
            )
        checkpoint = self._checkpoints.request_for(pending, end_of_input)
        spec = self._specs.epoch_spec(
            self._specs.job_spec(self._runner.cluster.application_id),
            epoch=self._epoch,
            run=self._run_id,
            prev_run=self._accepted_run,
            incarnation=self._incarnation,
            end_of_input=end_of_input,
            ranges=ranges,
            start=self._start,
            checkpoint=checkpoint,
            metric_bases=self._progress.metrics.bases(),
        )
        preferred = self._placement.preferred()
        watch = {e for e in preferred.values() if e is not None and e != DRIVER_EXECUTOR_ID}
        return self._runner.run(spec, self._placement.locations(), watch), preferred

    def _discard_run(self, reports: list[TaskReport], pending: PendingCheckpoint | None) -> None:
        """Throw away a run whose results cannot be used (a subtask had lost its state):
        abort what its sinks staged and the checkpoint it snapshot into."""
        for report in reports:
            self._sink_commits.discard(report.sink_outputs)
            self._recovery.discard(report.changelogs)
        self._checkpoints.abort_run(pending, "run discarded", reports)

    # -- an accepted epoch ---------------------------------------------------------------------
    def _accept(
        self, run: _AcceptedRun, ranges: dict[int, list[SplitRange]], seconds: float
    ) -> CompletedCheckpoint | None:
        """Go on with ``run``'s results; returns the checkpoint the epoch completed, if any."""
        sources = self._sources.source_stages
        records_in = sum(r.records_in for r in run.reports if r.stage in sources)
        self._pacer.epoch_accepted(self._epoch, records_in)
        self._restore.epoch_accepted()
        self._progress.epoch_accepted(records_in)
        self._accepted_run = self._run_id
        self._start.absorb(run.reports)
        for report in run.reports:
            self._sink_commits.absorb(self._epoch, report.sink_outputs)
        self._sources.commit_epoch(ranges)
        master_state = self._master_state() if run.pending is not None else None
        uploads = self._checkpoints.epoch_accepted(
            self._epoch, run.reports, run.pending, master_state
        )
        keyed, on_preferred = self._placement.observe(run.reports, run.preferred)
        self._progress.epoch_finished(
            self._epoch,
            run.reports,
            keyed,
            on_preferred,
            sources,
            runs=run.runs,
            seconds=seconds,
            checkpoint_id=run.pending.checkpoint_id if run.pending is not None else None,
            uploads=uploads,
            lag=self._sources.lag(),
            skipped=self._sources.skipped(),
        )
        return self._checkpoints.epoch_ended(self._epoch, run.pending, run.stop_request)

    def _master_state(self) -> JobMasterState:
        """The job master's part of a checkpoint of the epoch just accepted."""
        return JobMasterState(
            job_id=self._job_id,
            job_name=self._s.job_name,
            epoch=self._epoch,
            sources=self._sources.snapshot_state(),
            watermarks=dict(self._start.watermarks),
            generators=dict(self._start.generators),
            pending_sink_commits=tuple(self._sink_commits.pending_up_to(self._epoch)),
            recovery=self._progress.recovery_since(self._checkpoints.checkpointed_epoch),
            source_lag=self._sources.lag(),
        )

    def _end_stop(self, completed: CompletedCheckpoint | None, drain: bool) -> None:
        """After the epoch of a stop-with-savepoint: the job ends if its savepoint completed."""
        if completed is not None:
            self._terminate(JobStatus.FINISHED, commit=True)
            raise _StoppedWithSavepoint()
        if drain:
            # The epoch fired every event-time timer for a stop that then failed: its
            # state and output are the job's end, not a point to go on from.
            raise SparkpointError(
                "The savepoint of a stop with drain failed after the watermark reached "
                "the end of event time; the job restores from its latest checkpoint"
            )
        # A failed stop without drain leaves the job running (its future has the error).

    # -- recovery ------------------------------------------------------------------------------
    def _restored(self, start: StartState) -> None:
        """Go on from ``start`` (after a whole-job restore)."""
        self._start = start
        self._specs.plan_restored()

    def _failover_until_restored(self, exc: BaseException) -> bool:
        """Fail over; a failure while restoring (a sink's redone commit, say) is one more
        failure the restart strategy judges, not the end of the job. A cancel requested
        meanwhile ends the job (a restore that keeps failing, its Kafka broker gone, would
        hold it back for good); whether it did."""
        while True:
            cancel = self._requests.take_cancel()
            if cancel is not None:
                cancel.future.set_result(None)
                self._terminate(JobStatus.CANCELED)
                return True
            try:
                self._failover(exc)
                return False
            except JobExecutionError:
                raise
            except Exception as again:
                exc = again

    def _failover(self, exc: BaseException) -> None:
        why_not = self._restore.cannot_restart(exc, self._epoch)
        if why_not is not None:
            self._terminate(JobStatus.FAILED)
            raise JobExecutionError(why_not) from exc
        self._progress.set_status(JobStatus.RESTARTING)
        self._restore.back_off()
        self._progress.restarted()
        self._incarnation += 1
        self._abort_uncommitted()
        self._restored(self._restore.roll_back(exc, self._epoch, self._incarnation))
        self._progress.set_status(JobStatus.RUNNING)

    def _abort_uncommitted(self) -> None:
        self._sink_commits.abort_all()
        self._checkpoints.abort_all(CheckpointFailureReason.TASK_FAILURE)

    # -- the end -------------------------------------------------------------------------------
    def _terminate(self, status: JobStatus, commit: bool = False) -> None:
        if commit:
            self._sink_commits.commit_up_to(self._epoch)
        else:
            self._abort_uncommitted()
        self._checkpoints.shutdown(status)
        self._sink_commits.cleanup_job(self._job_id)
        self._progress.set_status(status)
        self._requests.fail_all(self._job_id, status)

    def _cleanup_local_state(self) -> None:
        """Delete the job's local state on every executor (a small pinned Spark job)."""
        try:
            executors = self._runner.cluster.live_executors()
            self._runner.cleanup(
                self._specs.job_spec(self._runner.cluster.application_id),
                {e: slot.location for e, slot in executors.items()},
                self._checkpoints.recently_aborted() | frozenset(self._changelog.aborted),
            )
        except Exception:  # the job's outcome stands; dead executors' roots get swept
            _LOG.warning("Job %s: could not remove local state", self._job_id, exc_info=True)
