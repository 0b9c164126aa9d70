"""The job master on the driver: the epoch loop, checkpoints, sink commits and recovery.

Per epoch it plans a bounded range of every source split, runs one Spark job, and then —
when a checkpoint was attached to the epoch — writes ``_metadata`` (source positions, the
keyed handles of every subtask, pending sink output) and commits the sinks up to that epoch.
On failure it applies the restart strategy and restores every subtask from the latest
completed checkpoint (a new *incarnation*): sources rewind, uncommitted output is aborted.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore
from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.config import (
    CheckpointingOptions,
    SparkpointOptions,
    StateBackendOptions,
    StateRecoveryOptions,
)
from sparkpoint.connectors.source import SplitEnumerator, SplitRange
from sparkpoint.errors import (
    CheckpointException,
    CheckpointFailureReason,
    JobExecutionError,
    SparkpointError,
    StateLostError,
)
from sparkpoint.fs.registry import get_options as get_fs_options
from sparkpoint.runtime.driver.changelog_checkpoints import ChangelogCheckpoints
from sparkpoint.runtime.driver.coordinator import (
    CheckpointCoordinator,
    CheckpointPolicy,
    PendingCheckpoint,
    TolerableFailuresExceeded,
)
from sparkpoint.runtime.driver.failures import short_error, unloadable_task
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.reports import (
    EpochReport,
    EpochStart,
    FailoverEvent,
    SubtaskRestoreEvent,
)
from sparkpoint.runtime.driver.restart import create_restart_backoff_strategy
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.driver.state_assignment import (
    assign_keyed_state,
    assign_operator_state,
    check_unmatched_state,
)
from sparkpoint.runtime.driver.subtask_recovery import SubtaskRecovery
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import (
    CheckpointRequest,
    EpochSpec,
    JobSpec,
    RestoreReason,
    SnapshotAck,
    StateLost,
    SubtaskRestore,
    TaskFaultHooks,
    TaskReport,
    UploadStatus,
)
from sparkpoint.runtime.spark.epoch import EpochRunner, ExecutorsLost, final_stage_ids, routing
from sparkpoint.runtime.spark.placement import Move, Placement
from sparkpoint.runtime.task.executor import DRIVER_EXECUTOR_ID
from sparkpoint.state.backend import SnapshotType

__all__ = ["JobFaultHooks", "JobMaster", "JobSettings", "JobStatus"]

_LOG = logging.getLogger("sparkpoint.job")
_MAX_RUNS_PER_EPOCH = 10  # Spark jobs one epoch may take before the job fails over
_KEPT_FAILOVERS = 20  # failovers a checkpoint's master state lists (the latest ones)


class JobFaultHooks(Protocol):
    """Fault injection for a job (implemented by ``sparkpoint.testing.Faults``)."""

    def before_epoch(self, event: EpochStart) -> None:
        """Called on the driver before every run of an epoch."""

    def task_hooks(self) -> TaskFaultHooks | None:
        """The picklable part that runs inside tasks (None: nothing to do there)."""


class JobStatus:
    """Flink's job statuses that a sparkpoint job goes through."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"


@dataclass
class JobSettings:
    """How to run a job: everything the environment configured."""

    job_name: str
    parallelism: int
    max_parallelism: int
    explicit_max_parallelism: bool
    policy: CheckpointPolicy
    checkpoint_storage: Any
    state_backend: Any
    restart_strategy: Any
    num_retained: int = CheckpointingOptions.MAX_RETAINED_CHECKPOINTS.default
    batch_mode: bool = False
    periodic_watermarks: bool = True
    restore_path: str | None = None
    claim_mode: str = StateRecoveryOptions.CLAIM_MODE.default
    allow_non_restored_state: bool = False
    max_records_per_split: int = SparkpointOptions.MAX_RECORDS_PER_SPLIT.default
    tasks_per_core: int = SparkpointOptions.TASKS_PER_CORE.default  # task groups
    changelog: bool = SparkpointOptions.CHANGELOG_ENABLED.default  # per-subtask recovery
    changelog_checkpoints: bool = StateBackendOptions.CHANGELOG_ENABLED.default
    materialize_interval_ms: int = StateBackendOptions.PERIODIC_MATERIALIZE_INTERVAL.default
    materialization_rate: int | None = None  # bytes per second per subtask; None: no limit
    periodic_materialization: bool = True
    materialization_failures_allowed: int = (
        StateBackendOptions.MATERIALIZATION_MAX_FAILURES_ALLOWED.default
    )
    idle_sleep_s: float = 0.2
    # With no new input, an (empty) epoch still runs this often, so processing-time timers
    # fire and checkpoints are taken while a continuous source is idle.
    idle_epoch_interval_s: float = 1.0
    # sparkpoint.local-state.dir: None keeps local state in each executor's Spark local dir
    local_state_dir: str | None = None
    job_parameters: dict[str, str] = field(default_factory=dict)
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    faults: JobFaultHooks | None = None  # fault injection (sparkpoint.testing)
    dashboard: Any = None  # DashboardSettings: serve the job's dashboard (None: don't)


@dataclass
class _Request:
    kind: str  # savepoint | stop | cancel
    target: str | None
    drain: bool
    future: Future[Any]


class JobMaster:
    """Runs one job to its end (FINISHED, CANCELED or FAILED).

    ``clock`` decides checkpoint intervals and timeouts, restart delays, idle epochs and the
    processing time every epoch's tasks see (read once per epoch, shipped in the spec).
    """

    def __init__(
        self, spark: Any, plan: Plan, settings: JobSettings, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.spark = spark
        self.plan = plan
        self.s = settings
        self.clock = clock
        self.job_id = settings.job_id
        self.status = JobStatus.CREATED
        self.requests: queue.Queue[_Request] = queue.Queue()
        self.epoch = 0
        self.incarnation = 0
        self.run_id = 0  # Spark jobs run so far (every run of every epoch)
        self.accepted_run: int | None = None  # the run whose results the last epoch used
        self.epochs_run = 0
        self.restarts = 0
        self.epoch_seconds: list[float] = []
        self.epoch_reports: list[EpochReport] = []
        self.failovers: list[FailoverEvent] = []
        self._last_failover: FailoverEvent | None = None
        self._checkpointed_epoch = 0  # epoch of the latest completed checkpoint
        self.records_in = 0
        self.watermarks: dict[str, int] = {}
        self.generators: dict[str, int] = {}
        self.restore_spec: dict[str, dict[int, SubtaskRestore]] = {}
        # Operator (broadcast) state each subtask starts the next epoch from: what the
        # accepted run of the last epoch ended with (runtime/task/carried_state.py).
        self.operator_state: dict[str, dict[int, tuple[Any, ...]]] = {}
        self.notify_complete: int | None = None
        self.sink_commits = SinkCommits({n.operator_id: n.sink for n in plan.sinks})
        self.finals = final_stage_ids(plan)
        self.routes = routing(plan)
        self.runner = EpochRunner(spark, plan, settings.tasks_per_core)
        self.placement = Placement()
        self.keyed_stages = {st.id: st.parallelism for st in plan.stages if st.keyed}
        self.changelog = ChangelogCheckpoints(
            plan,
            settings.changelog_checkpoints and settings.policy.enabled,
            settings.materialize_interval_ms if settings.periodic_materialization else None,
            settings.state_backend.keyed_backend_name(),
            settings.materialization_failures_allowed,
        )
        self.recovery = SubtaskRecovery(
            plan,
            settings.explicit_max_parallelism,
            enabled=settings.changelog and settings.policy.enabled,
            hand_over=self.changelog.enabled,
        )
        # (operator id, subtask) -> why it restores alone in the next run
        self._restore_causes: dict[tuple[str, int], str] = {}
        self.enumerators = {
            st.source.operator_id: SplitEnumerator(
                st.source.source, st.source.parallelism or settings.parallelism
            )
            for st in plan.stages
            if st.source is not None
        }
        self.stage_of_source = {
            st.source.operator_id: st.id for st in plan.stages if st.source is not None
        }
        storage = settings.checkpoint_storage
        self.storage_access = storage.create_checkpoint_storage(self.job_id)
        self.store = CompletedCheckpointStore(max(1, settings.num_retained))
        self.cleaner = CheckpointsCleaner()
        self.coordinator = CheckpointCoordinator(
            self.job_id,
            settings.policy,
            self.storage_access,
            self.store,
            self.cleaner,
            clock=clock,
        )
        self.restart = create_restart_backoff_strategy(
            settings.restart_strategy, checkpointing_enabled=settings.policy.enabled, clock=clock
        )
        self._last_epoch_end_ms = clock.monotonic_ms()

    # -- public control (job client) -------------------------------------------------------
    def request(self, kind: str, target: str | None = None, drain: bool = False) -> Future[Any]:
        """Queue a savepoint, stop-with-savepoint or cancel; handled at the next epoch end."""
        fut: Future[Any] = Future()
        self.requests.put(_Request(kind, target, drain, fut))
        return fut

    # -- running ---------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run the job to its end; returns the accumulated result statistics."""
        self.status = JobStatus.RUNNING
        started = time.perf_counter()
        try:
            if self.s.policy.enabled:
                self.storage_access.initialize_base_locations_for_checkpoint()
            self._initial_restore()
            while True:
                stop = self._handle_requests()
                if stop == "cancel":
                    self._terminate(JobStatus.CANCELED)
                    break
                try:
                    finished = self._run_one_epoch(stop_request=stop)
                except CancelledByRequest:
                    break
                except Exception as exc:
                    self._failover_until_restored(exc)
                    continue
                if finished:
                    self._finish()
                    break
        except BaseException:
            if self.status not in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED):
                self.status = JobStatus.FAILED
            self._fail_requests()
            raise
        finally:
            self.recovery.close()
            self.changelog.close()
            self.cleaner.close()
            self._cleanup_local_state()
        return {
            "job_id": self.job_id,
            "status": self.status,
            "net_runtime_ms": int((time.perf_counter() - started) * 1000),
            "epochs": self.epochs_run,
            "restarts": self.restarts,
            "records_in": self.records_in,
        }

    def _handle_requests(self) -> str | _Request | None:
        try:
            req = self.requests.get_nowait()
        except queue.Empty:
            return None
        if req.kind == "cancel":
            req.future.set_result(None)
            return "cancel"
        return req

    def _plan_ranges(self) -> dict[int, list[SplitRange]]:
        out: dict[int, list[SplitRange]] = {}
        for op_id, enum in self.enumerators.items():
            out[self.stage_of_source[op_id]] = enum.plan_epoch(self.s.max_records_per_split)
        return out

    def _end_of_input(self, ranges: dict[int, list[SplitRange]]) -> bool:
        """Whether this epoch reads the last records of every (bounded) source."""
        from sparkpoint.connectors.source import Boundedness

        for op_id, enum in self.enumerators.items():
            if enum.source.get_boundedness() != Boundedness.BOUNDED:
                return False
            planned = {r.split_id: r for r in ranges[self.stage_of_source[op_id]]}
            for split in enum.splits.values():
                r = planned.get(split.split_id)
                if not split.finished and (r is None or not r.last):
                    return False
        return True

    def _job_spec(self) -> JobSpec:
        faults = self.s.faults
        return JobSpec(
            job_id=self.job_id,
            job_name=self.s.job_name,
            state_backend=self.s.state_backend,
            batch_mode=self.s.batch_mode,
            periodic_watermarks=self.s.periodic_watermarks,
            application_id=self.runner.cluster.application_id,
            local_state_dir=self.s.local_state_dir,
            job_parameters=self.s.job_parameters,
            final_stage_ids=self.finals,
            routes=self.routes,
            fs_options=dict(get_fs_options()),
            changelog_storage=self.s.checkpoint_storage if self.recovery.enabled else None,
            changelog_checkpoints=self.changelog.enabled,
            materialization_rate=self.s.materialization_rate,
            faults=faults.task_hooks() if faults is not None else None,
        )

    def _checkpoint_request(self, pending: Any, end_of_input: bool) -> CheckpointRequest | None:
        if pending is None:
            return None
        savepoint = pending.properties.is_savepoint
        # Savepoints upload within their epoch (stop-with-savepoint ends the job with it).
        pending.asynchronous = not savepoint and self.s.state_backend.asynchronous_snapshots()
        full = self.store.forces_full_snapshot
        now_ms = self.clock.monotonic_ms()
        pending.materialize = (
            savepoint
            or full
            or self.changelog.should_materialize(
                now_ms,
                others_in_flight=len(self.coordinator.pending) > 1,
                background=pending.asynchronous,
            )
        )
        # The epoch ending the input stores no changelog: nothing would start uploading.
        pending.materialize_in_background = (
            not pending.materialize
            and pending.asynchronous
            and not end_of_input
            and self.changelog.start_background(pending.checkpoint_id, now_ms)
        )
        return CheckpointRequest(
            pending.checkpoint_id,
            self.s.checkpoint_storage,
            pending.location.get_location_reference(),
            SnapshotType.SAVEPOINT
            if savepoint
            else SnapshotType.FULL_CHECKPOINT
            if full
            else SnapshotType.CHECKPOINT,
            asynchronous=pending.asynchronous,
            materialize=pending.materialize,
            materialize_in_background=pending.materialize_in_background,
        )

    def _run_one_epoch(self, stop_request: Any) -> bool:
        ranges = self._plan_ranges()
        end_of_input = self._end_of_input(ranges)
        has_data = any(ranges.values())
        if not has_data and not end_of_input and stop_request is None and not self.restore_spec:
            time.sleep(self.s.idle_sleep_s)
            idle_ms = self.clock.monotonic_ms() - self._last_epoch_end_ms
            if not self.coordinator.is_due() and idle_ms < self.s.idle_epoch_interval_s * 1000:
                return False
        self.epoch += 1
        t0 = time.perf_counter()
        runs = 0
        while True:
            runs += 1
            pending = self._trigger(stop_request, end_of_input)
            if isinstance(stop_request, _Request) and stop_request.future.done():
                stop_request = None  # its savepoint failed to trigger: no drain, no stop
            drain = isinstance(stop_request, _Request) and stop_request.drain
            try:
                reports, preferred = self._run_once(ranges, end_of_input or drain, pending)
                lost = [lost for r in reports for lost in r.lost]
                if not lost:
                    break
                self._discard_run(reports, pending)
                if runs > _MAX_RUNS_PER_EPOCH or not self._plan_subtask_restores(lost):
                    first = lost[0]
                    raise StateLostError(
                        f"Subtask {first.subtask} of operator {first.operator_id} found "
                        f"{first.detail}; the job restores from the latest checkpoint."
                    )
            except ExecutorsLost as exc:
                _LOG.warning("Job %s epoch %d: %s; running it again", self.job_id, self.epoch, exc)
                if pending is not None and pending in self.coordinator.pending:
                    self.coordinator.abort(pending, CheckpointFailureReason.TASK_FAILURE, str(exc))
                if runs > _MAX_RUNS_PER_EPOCH:
                    self._requeue(stop_request)
                    raise
            except BaseException:
                if pending is not None:
                    self.coordinator.abort_all(CheckpointFailureReason.TASK_FAILURE)
                self._requeue(stop_request)
                raise
        seconds = time.perf_counter() - t0
        self.epoch_seconds.append(seconds)
        self._last_epoch_end_ms = self.clock.monotonic_ms()
        self.epochs_run += 1
        self.accepted_run = self.run_id
        acks = self._absorb(reports, ranges)
        self.recovery.accept(a for r in reports for a in r.changelogs)
        self.changelog.observe(a for r in reports for a in r.changelogs)
        self.changelog.run_accepted(
            self.epoch,
            {(a.operator_id, a.subtask) for a in acks if a.changelog},
            pending.checkpoint_id if pending is not None else None,
        )
        self.changelog.advance(
            (m for r in reports for m in r.materializations), self.clock.monotonic_ms()
        )
        self.restore_spec = {}
        if pending is not None:
            pending.master_state = self._master_state(self.epoch)
            if pending.asynchronous:
                pending.acks = list(acks)
                pending.awaiting = self._keyed_subtasks() - {
                    (a.operator_id, a.subtask) for a in acks if not a.operator_state
                }
        uploads = self._advance_uploads(reports)
        self._record_epoch(reports, preferred, seconds, runs, pending, uploads)
        completed = None
        if pending is not None and not pending.asynchronous:
            completed = self._complete_checkpoint(pending, acks, stop_request)
            if completed is not None:
                self._covered(completed, self.epoch)
            else:
                self.recovery.checkpoint_failed()
        elif pending is None and not self.s.policy.enabled:
            self.sink_commits.commit_up_to(self.epoch)
        if self.s.policy.enabled and self.s.policy.at_least_once:
            # AT_LEAST_ONCE publishes every epoch's output now, checkpoint or not.
            self.sink_commits.commit_up_to(self.epoch)
        if isinstance(stop_request, _Request) and stop_request.kind == "stop":
            if completed is not None:
                self._terminate(JobStatus.FINISHED, commit=True)
                raise CancelledByRequest()
            if drain:
                # The epoch fired every event-time timer for a stop that then failed: its
                # state and output are the job's end, not a point to go on from.
                raise SparkpointError(
                    "The savepoint of a stop with drain failed after the watermark reached "
                    "the end of event time; the job restores from its latest checkpoint"
                )
            # A failed stop without drain leaves the job running (its future has the error).
        return end_of_input

    def _trigger(self, stop_request: Any, end_of_input: bool) -> PendingCheckpoint | None:
        """The checkpoint (or savepoint) this run of the epoch snapshots into, if any. A
        savepoint that cannot be triggered fails its request (the job goes on, as in
        Flink); a checkpoint that cannot be, only itself (the coordinator recorded it)."""
        try:
            if isinstance(stop_request, _Request):
                return self.coordinator.trigger(
                    self.epoch,
                    stop_request.target,
                    is_savepoint=True,
                    synchronous=stop_request.kind == "stop",
                )
            if self.coordinator.is_due() and not end_of_input:
                return self.coordinator.trigger(self.epoch)
        except CheckpointException as exc:
            if isinstance(stop_request, _Request):
                stop_request.future.set_exception(exc)
        return None

    def _requeue(self, stop_request: Any) -> None:
        if isinstance(stop_request, _Request):
            self.requests.put(stop_request)  # retry after the restore

    def _run_once(
        self,
        ranges: dict[int, list[SplitRange]],
        end_of_input: bool,
        pending: PendingCheckpoint | None,
    ) -> tuple[list[TaskReport], dict[tuple[int, int], str | None]]:
        """One Spark job for the epoch; returns the reports and where each keyed subtask
        was meant to run."""
        executors = self.runner.cluster.live_executors()
        moves = self.placement.update(executors, self.keyed_stages)
        self._on_moves(moves)
        self.run_id += 1
        if self.s.faults is not None:
            self.s.faults.before_epoch(
                EpochStart(self.job_id, self.epoch, self.run_id, self._placement_view())
            )
        checkpoint = self._checkpoint_request(pending, end_of_input)
        spec = EpochSpec(
            job=self._job_spec(),
            epoch=self.epoch,
            run=self.run_id,
            prev_run=self.accepted_run,
            incarnation=self.incarnation,
            end_of_input=end_of_input,
            watermarks=dict(self.watermarks),
            generator_state=dict(self.generators),
            source_ranges=ranges,
            processing_time_ms=self.clock.now_ms(),
            checkpoint=checkpoint,
            restore=self.restore_spec,
            operator_state=self.operator_state,
            notify_complete=self.notify_complete,
            pending_checkpoints=frozenset(p.checkpoint_id for p in self.coordinator.pending),
            aborted_checkpoints=frozenset(self.coordinator.recently_aborted),
            pending_materializations=self.changelog.pending_materializations(),
            aborted_materializations=frozenset(self.changelog.aborted),
            notify_materialized=self.changelog.notify_id,
        )
        preferred = {
            (stage, sub): self.placement.executor_of(stage, sub)
            for stage, p in self.keyed_stages.items()
            for sub in range(p)
        }
        locations = {stage: self.placement.locations(stage) for stage in self.keyed_stages}
        watch = {e for e in preferred.values() if e is not None and e != DRIVER_EXECUTOR_ID}
        return self.runner.run(spec, locations, watch), preferred

    def _placement_view(self) -> dict[str, tuple[str, ...]]:
        """Keyed operator id -> executor of each of its subtasks."""
        out: dict[str, tuple[str, ...]] = {}
        for st in self.plan.stages:
            if st.id in self.keyed_stages:
                executors = tuple(
                    self.placement.executor_of(st.id, i) or "" for i in range(st.parallelism)
                )
                for node in st.keyed_nodes:
                    out[node.operator_id] = executors
        return out

    def _on_moves(self, moves: list[Move]) -> None:
        """Subtasks placed on a new executor because theirs is gone restore there (a
        whole-job restore already planned covers them)."""
        for move in moves:
            if move.old_executor is None:
                continue
            _LOG.info(
                "Job %s: keyed subtask %d of stage %d moves from lost executor %s to %s",
                self.job_id,
                move.subtask,
                move.stage,
                move.old_executor,
                move.new_executor,
            )
            if not self.recovery.can_restore():
                continue  # the subtask will find no state there; the job then fails over
            for node in self.plan.stages[move.stage].keyed_nodes:
                planned = self.restore_spec.get(node.operator_id, {}).get(move.subtask)
                if planned is None or planned.reason == RestoreReason.SUBTASK:
                    self._plan_restore(
                        node.operator_id, move.subtask, f"executor {move.old_executor} lost"
                    )

    def _discard_run(self, reports: list[TaskReport], pending: PendingCheckpoint | None) -> None:
        """Throw away a run whose results cannot be used (a subtask had lost its state):
        abort what its sinks staged and the checkpoint it snapshot into."""
        for report in reports:
            self.sink_commits.discard(report.sink_outputs)
            self.recovery.discard(report.changelogs)
        if pending is not None and pending in self.coordinator.pending:
            handles = [a.handle for r in reports for a in r.snapshots if a.handle is not None]
            self.coordinator.abort(
                pending, CheckpointFailureReason.TASK_FAILURE, "run discarded", states=handles
            )

    def _plan_subtask_restores(self, lost: list[StateLost]) -> bool:
        """Prepare restores for subtasks that lost their state; False if the job must fail
        over instead."""
        if not self.recovery.can_restore():
            return False
        for item in lost:
            self._plan_restore(item.operator_id, item.subtask, f"state lost: {item.detail}")
        return True

    def _plan_restore(self, operator_id: str, subtask: int, cause: str) -> None:
        plan = self.recovery.restore_for(operator_id, subtask)
        self.restore_spec.setdefault(operator_id, {})[subtask] = plan
        self._restore_causes[(operator_id, subtask)] = cause
        _LOG.info(
            "Job %s: subtask %d of %s restores alone (checkpoint %s + %d changelog epochs): %s",
            self.job_id,
            subtask,
            operator_id,
            self.recovery.base.checkpoint_id if self.recovery.base else "none",
            len(plan.changelog),
            cause,
        )

    def _absorb(self, reports: list[TaskReport], ranges: dict[int, list[SplitRange]]) -> Any:
        acks: list[SnapshotAck] = []
        sources = set(self.stage_of_source.values())
        # Subtasks usually end with identical broadcast state: keep one handle object per
        # content, so the next EpochSpec pickles it once.
        same: dict[Any, Any] = {}
        for report in reports:
            acks.extend(report.snapshots)
            for carried in report.operator_states:
                handle = carried.handle
                if handle is not None:
                    handle = same.setdefault(_content(handle), handle)
                self.operator_state.setdefault(carried.operator_id, {})[carried.subtask] = (
                    (handle,) if handle is not None else ()
                )
            self.sink_commits.absorb(self.epoch, report.sink_outputs)
            self.watermarks.update(report.watermarks)
            for key, max_ts in report.max_timestamps.items():  # key: operator@split/subtask
                if max_ts is not None:
                    self.generators[key] = max(self.generators.get(key, max_ts), max_ts)
            if report.stage in sources:
                self.records_in += report.records_in
        for op_id, enum in self.enumerators.items():
            enum.commit_epoch(ranges[self.stage_of_source[op_id]])
        return acks

    def _record_epoch(
        self,
        reports: list[TaskReport],
        preferred: dict[tuple[int, int], str | None],
        seconds: float,
        runs: int,
        pending: PendingCheckpoint | None,
        uploads: tuple[int, int] = (0, 0),
    ) -> None:
        keyed = [r for r in reports if r.stage in self.keyed_stages]
        on_preferred = 0
        for r in keyed:
            if preferred.get((r.stage, r.subtask)) == r.executor.executor_id:
                on_preferred += 1
            elif self.placement.observe(r.stage, r.subtask, r.executor.executor_id):
                _LOG.info(
                    "Job %s: keyed subtask %d of stage %d ran on executor %s, not on %s; "
                    "it stays there",
                    self.job_id,
                    r.subtask,
                    r.stage,
                    r.executor.executor_id,
                    preferred.get((r.stage, r.subtask)),
                )
        restores = tuple(
            SubtaskRestoreEvent(
                self.epoch,
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
        report = EpochReport(
            epoch=self.epoch,
            runs=runs,
            seconds=seconds,
            records_in=sum(
                r.records_in for r in reports if r.stage in self.stage_of_source.values()
            ),
            keyed_tasks=len(keyed),
            on_preferred_executor=on_preferred,
            subtask_restores=restores,
            failover=self._last_failover,
            checkpoint_id=pending.checkpoint_id if pending is not None else None,
            uploads_in_flight=uploads[0],
            uploads_completed=uploads[1],
            changelog_bytes=sum(
                a.size for r in reports for a in r.changelogs if a.handle is not None
            ),
        )
        self._last_failover = None
        self.epoch_reports.append(report)
        _LOG.info("Job %s %s", self.job_id, report.describe())

    # -- checkpoints -----------------------------------------------------------------------
    def _keyed_subtasks(self) -> set[tuple[str, int]]:
        """(operator id, subtask) of every keyed subtask of the job."""
        return {
            (node.operator_id, i)
            for st in self.plan.stages
            for node in st.keyed_nodes
            for i in range(st.parallelism)
        }

    def _advance_uploads(self, reports: list[TaskReport]) -> tuple[int, int]:
        """Take the upload statuses of an accepted run: complete the asynchronous
        checkpoints whose uploads all ended (oldest first; a completed one subsumes older
        pending ones), abort those whose upload failed, was lost or timed out. Returns the
        uploads (still running, completed in this epoch)."""
        statuses = {
            (s.checkpoint_id, s.operator_id, s.subtask): s for r in reports for s in r.uploads
        }
        running = completed_now = 0
        waiting = sorted(
            (p for p in self.coordinator.pending if p.asynchronous and p.master_state),
            key=lambda p: p.checkpoint_id,
        )
        for pending in waiting:
            if pending not in self.coordinator.pending:
                continue  # subsumed by a newer one completed in this loop
            failure: tuple[CheckpointFailureReason, str] | None = None
            for op, sub in sorted(pending.awaiting):
                status = statuses.get((pending.checkpoint_id, op, sub))
                if status is None or status.state == UploadStatus.LOST:
                    detail = status.detail if status is not None else "no record of it"
                    failure = (
                        CheckpointFailureReason.TASK_FAILURE,
                        f"upload of {op}#{sub} lost: {detail}",
                    )
                elif status.state == UploadStatus.FAILED:
                    failure = (
                        CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
                        f"upload of {op}#{sub} failed: {status.detail}",
                    )
                elif status.state == UploadStatus.DONE:
                    pending.acks.append(SnapshotAck(op, sub, status.handle, status.state_size))
                    pending.awaiting.discard((op, sub))
                    completed_now += 1
                else:
                    running += 1
                if failure is not None:
                    break
            if failure is None and pending.expired(
                self.clock.monotonic_ms(), self.s.policy.timeout_ms
            ):
                failure = (
                    CheckpointFailureReason.CHECKPOINT_EXPIRED,
                    f"uploads still running after {self.s.policy.timeout_ms} ms",
                )
            if failure is not None:
                self.coordinator.abort(
                    pending, failure[0], failure[1], states=pending.acks_handles()
                )
                continue
            if pending.awaiting:
                continue
            completed = self._complete_checkpoint(pending, pending.acks, None)
            if completed is None:
                continue
            self._covered(completed, pending.epoch)
            for older in list(self.coordinator.pending):
                if older.checkpoint_id < pending.checkpoint_id and not (
                    older.properties.is_savepoint
                ):
                    self.coordinator.abort(
                        older,
                        CheckpointFailureReason.CHECKPOINT_SUBSUMED,
                        states=older.acks_handles(),
                    )
        return running, completed_now

    def _operator_states(self, acks: list[SnapshotAck]) -> list[OperatorState]:
        keyed: dict[str, dict[int, tuple[Any, ...]]] = {}
        operator: dict[str, dict[int, tuple[Any, ...]]] = {}
        for ack in acks:
            table = operator if ack.operator_state else keyed
            handles = (ack.handle,) if ack.handle is not None else ()
            table.setdefault(ack.operator_id, {})[ack.subtask] = handles
        states = []
        for st in self.plan.stages:
            keyed_ids = {n.operator_id for n in st.keyed_nodes}
            operator_ids = {n.operator_id for n in st.operator_state_nodes}
            for node in st.members:
                op_id = node.operator_id
                if op_id not in keyed_ids and op_id not in operator_ids:
                    continue
                k, o = keyed.get(op_id, {}), operator.get(op_id, {})
                missing = [
                    i
                    for i in range(st.parallelism)
                    if (op_id in keyed_ids and i not in k) or (op_id in operator_ids and i not in o)
                ]
                if missing:
                    raise CheckpointException(
                        CheckpointFailureReason.CHECKPOINT_DECLINED,
                        f"operator {op_id}: no snapshot from subtasks {missing}",
                    )
                subs = {
                    i: OperatorSubtaskState(
                        managed_keyed_state=k.get(i, ()), managed_operator_state=o.get(i, ())
                    )
                    for i in range(st.parallelism)
                }
                states.append(OperatorState(op_id, st.parallelism, st.max_parallelism, subs))
        return states

    def _master_state(self, up_to_epoch: int) -> JobMasterState:
        return JobMasterState(
            job_id=self.job_id,
            job_name=self.s.job_name,
            epoch=up_to_epoch,
            sources={op: e.snapshot_state() for op, e in self.enumerators.items()},
            watermarks=dict(self.watermarks),
            generators=dict(self.generators),
            pending_sink_commits=tuple(self.sink_commits.pending_up_to(up_to_epoch)),
            recovery={
                "epochs": [
                    e.to_json() for e in self.epoch_reports if e.epoch > self._checkpointed_epoch
                ],
                "failovers": [dataclasses.asdict(f) for f in self.failovers[-_KEPT_FAILOVERS:]],
            },
        )

    def _complete_checkpoint(
        self, pending: Any, acks: list[SnapshotAck], stop_request: Any
    ) -> CompletedCheckpoint | None:
        try:
            if self.changelog.enabled and not pending.properties.is_savepoint:
                acks = self.changelog.compose(
                    pending.checkpoint_id, pending.epoch, acks, self.recovery.entries
                )
            op_states = self._operator_states(acks)
            completed = self.coordinator.complete(
                pending, op_states, [pending.master_state.to_master_state()]
            )
        except CheckpointException as exc:
            failure: CheckpointException = exc
            if pending in self.coordinator.pending:
                handles = [a.handle for a in acks if a.handle is not None]
                try:
                    self.coordinator.abort(pending, exc.reason, str(exc), states=handles)
                except TolerableFailuresExceeded as exceeded:
                    failure = exceeded
            if isinstance(stop_request, _Request):
                stop_request.future.set_exception(failure)
            if isinstance(failure, TolerableFailuresExceeded):
                raise failure from exc  # the job fails over (restart strategy applies)
            return None
        self.notify_complete = completed.checkpoint_id
        self._checkpointed_epoch = pending.epoch
        self.sink_commits.commit_up_to(pending.epoch)
        if isinstance(stop_request, _Request):
            stop_request.future.set_result(completed.external_pointer)
        return completed

    def _covered(self, completed: CompletedCheckpoint, epoch: int) -> None:
        """``completed`` covers every epoch up to ``epoch``."""
        covered = self.recovery.checkpoint_completed(completed, epoch)
        if self.changelog.enabled:
            self.changelog.completed(completed, epoch, covered, self.clock.monotonic_ms())

    # -- recovery --------------------------------------------------------------------------
    def _initial_restore(self) -> None:
        if self.s.restore_path is None:
            self._restore_from(None, RestoreReason.START)
            self.recovery.reset(None, 0)
            self.changelog.reset()
            return
        metadata, location = load_checkpoint(self.s.checkpoint_storage, self.s.restore_path)
        check_unmatched_state(self.plan, metadata, self.s.allow_non_restored_state)
        restored = CompletedCheckpoint.from_metadata(self.job_id, metadata, location)
        self.store.add_restored_checkpoint(restored, self.s.claim_mode)
        self.coordinator.next_checkpoint_id = metadata.checkpoint_id + 1
        self._restore_from(metadata, RestoreReason.START)
        self.recovery.reset(restored, 0)
        self.changelog.reset()
        _LOG.info("Job %s restored from %s", self.job_id, location.external_pointer)

    def _restore_from(self, metadata: CheckpointMetadata | None, reason: RestoreReason) -> None:
        assigned = assign_keyed_state(self.plan, metadata, self.s.explicit_max_parallelism)
        self.restore_spec = {
            op: {sub: SubtaskRestore(tuple(hs), reason=reason) for sub, hs in subs.items()}
            for op, subs in assigned.items()
        }
        self.operator_state = assign_operator_state(self.plan, metadata)
        # The max parallelism may have been adopted from the checkpoint: re-derive routing.
        self.routes = routing(self.plan)
        master = JobMasterState.from_metadata(metadata)
        if master is None:
            for enum in self.enumerators.values():
                enum.reset()
            self.watermarks, self.generators = {}, {}
            return
        for op_id, enum in self.enumerators.items():
            if op_id in master.sources:
                enum.restore_state(master.sources[op_id])
            else:
                enum.reset()
        self.watermarks = dict(master.watermarks)
        self.generators = dict(master.generators)
        self.sink_commits.recommit(master.pending_sink_commits)

    def _failover_until_restored(self, exc: BaseException) -> None:
        """Fail over; a failure while restoring (a sink's redone commit, say) is one more
        failure the restart strategy judges, not the end of the job."""
        while True:
            try:
                self._failover(exc)
                return
            except JobExecutionError:
                raise
            except Exception as again:
                exc = again

    def _failover(self, exc: BaseException) -> None:
        _LOG.warning("Job %s epoch %d failed: %s", self.job_id, self.epoch, short_error(exc))
        _LOG.debug(
            "Job %s epoch %d failed; the whole error:", self.job_id, self.epoch, exc_info=exc
        )
        unloadable = unloadable_task(exc)
        if unloadable is not None:
            self._terminate(JobStatus.FAILED)
            raise JobExecutionError(
                f"Job {self.s.job_name!r} ({self.job_id}) cannot run: {unloadable}."
            ) from exc
        self.restart.notify_failure(exc)
        if not self.restart.can_restart():
            self._terminate(JobStatus.FAILED)
            raise JobExecutionError(
                f"Job {self.s.job_name!r} ({self.job_id}) failed after {self.restarts} "
                f"restarts: {short_error(exc)}"
            ) from exc
        self.status = JobStatus.RESTARTING
        backoff = self.restart.get_backoff_time_ms()
        if backoff > 0:
            time.sleep(backoff / 1000.0)
        self.restarts += 1
        self.incarnation += 1
        self._abort_uncommitted()
        latest = self._latest_for_recovery()
        self._restore_from(latest.metadata if latest is not None else None, RestoreReason.FAILOVER)
        self.recovery.reset(latest, self.epoch)
        self.changelog.reset()
        self._restore_causes.clear()
        event = FailoverEvent(
            self.epoch, self.incarnation, latest.checkpoint_id if latest else None, short_error(exc)
        )
        self.failovers.append(event)
        self._last_failover = event
        _LOG.info(
            "Job %s failed over to %s",
            self.job_id,
            f"checkpoint {latest.checkpoint_id}" if latest is not None else "the start",
        )
        self.status = JobStatus.RUNNING

    def _latest_for_recovery(self) -> CompletedCheckpoint | None:
        checkpoints = self.store.get_all_checkpoints()
        if not checkpoints:
            return None
        if self.s.policy.prefer_checkpoint_for_recovery:
            for cp in reversed(checkpoints):
                if not cp.properties.is_savepoint:
                    return cp
        latest = checkpoints[-1]
        if latest.metadata is None:
            metadata, _ = load_checkpoint(self.storage_access, latest.external_pointer)
            latest.metadata = metadata
        return latest

    def _abort_uncommitted(self) -> None:
        self.sink_commits.abort_all()
        self.coordinator.abort_all(CheckpointFailureReason.TASK_FAILURE)

    # -- the end ---------------------------------------------------------------------------
    def _finish(self) -> None:
        self._terminate(JobStatus.FINISHED, commit=True)

    def _terminate(self, status: str, commit: bool = False) -> None:
        if commit:
            self.sink_commits.commit_up_to(self.epoch)
        else:
            self._abort_uncommitted()
        self.coordinator.abort_all(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        self.store.shutdown(status, self.cleaner)
        self.sink_commits.cleanup_job(self.job_id)
        self.status = status
        self._fail_requests()

    def _fail_requests(self) -> None:
        while True:
            try:
                req = self.requests.get_nowait()
            except queue.Empty:
                return
            if not req.future.done():
                req.future.set_exception(
                    SparkpointError(f"Job {self.job_id} is {self.status}; {req.kind} not done")
                )

    def _cleanup_local_state(self) -> None:
        """Delete the job's local state on every executor (a small pinned Spark job)."""
        try:
            executors = self.runner.cluster.live_executors()
            self.runner.cleanup(
                self._job_spec(),
                {e: slot.location for e, slot in executors.items()},
                frozenset((*self.coordinator.recently_aborted, *self.changelog.aborted)),
            )
        except Exception:  # the job's outcome stands; dead executors' roots get swept
            _LOG.warning("Job %s: could not remove local state", self.job_id, exc_info=True)


class CancelledByRequest(Exception):
    """Internal: the loop ends because a stop-with-savepoint finished the job."""


def _content(handle: Any) -> Any:
    """What makes two in-memory operator state handles equal: their bytes and offsets."""
    offsets = tuple(
        sorted(
            (name, meta.offsets) for name, meta in handle.state_name_to_partition_offsets.items()
        )
    )
    return getattr(handle.delegate, "data", handle.delegate), offsets
