"""The job master on the driver: the epoch loop, checkpoints, sink commits and recovery.

Per epoch it plans a bounded range of every source split, runs one Spark job, and then —
when a checkpoint was attached to the epoch — writes ``_metadata`` (source positions, the
keyed handles of every subtask, pending sink output) and commits the sinks up to that epoch.
On failure it applies the restart strategy and restores every subtask from the latest
completed checkpoint (a new *incarnation*): sources rewind, uncommitted output is aborted.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.metadata_format import load_checkpoint
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore
from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.config import CheckpointingOptions, SparkpointOptions, StateRecoveryOptions
from sparkpoint.connectors.source import SplitEnumerator, SplitRange
from sparkpoint.errors import (
    CheckpointException,
    CheckpointFailureReason,
    JobExecutionError,
    SparkpointError,
)
from sparkpoint.fs.registry import get_options as get_fs_options
from sparkpoint.runtime.coordinator import (
    CheckpointCoordinator,
    CheckpointPolicy,
    TolerableFailuresExceeded,
)
from sparkpoint.runtime.epoch import final_stage_ids, routing, run_epoch
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.records import (
    KIND_ACK,
    KIND_COLLECT,
    KIND_COMMITTABLE,
    KIND_META,
    KIND_STATS,
)
from sparkpoint.runtime.restart import create_restart_backoff_strategy
from sparkpoint.runtime.state_assignment import assign_keyed_state, check_unmatched_state
from sparkpoint.runtime.task import CheckpointRequest, EpochSpec
from sparkpoint.state.backend import SnapshotType

__all__ = ["JobMaster", "JobSettings", "JobStatus"]

_LOG = logging.getLogger("sparkpoint.job")
_MASTER = "sparkpoint.job"


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
    restore_path: str | None = None
    claim_mode: str = StateRecoveryOptions.CLAIM_MODE.default
    allow_non_restored_state: bool = False
    max_records_per_split: int = SparkpointOptions.MAX_RECORDS_PER_SPLIT.default
    idle_sleep_s: float = 0.2
    # With no new input, an (empty) epoch still runs this often, so processing-time timers
    # fire and checkpoints are taken while a continuous source is idle.
    idle_epoch_interval_s: float = 1.0
    local_root: str = field(
        default_factory=lambda: os.path.join(tempfile.gettempdir(), "sparkpoint-state")
    )
    job_parameters: dict[str, str] = field(default_factory=dict)
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # Failure-injection hooks (tests): on the driver before each epoch, with (master, epoch);
    # in tasks after each local state commit, with (operator id, subtask, epoch).
    before_epoch: Any = None
    after_local_commit: Any = None


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
        self.epochs_run = 0
        self.restarts = 0
        self.epoch_seconds: list[float] = []
        self.records_in = 0
        self.watermarks: dict[str, int] = {}
        self.generators: dict[str, int] = {}
        self.pending_commits: list[tuple[int, str, list[Any]]] = []
        self.restore_spec: dict[str, dict[int, list[Any]]] | None = None
        self.notify_complete: int | None = None
        self.sinks = {n.operator_id: n.sink for n in plan.sinks}
        self.finals = final_stage_ids(plan)
        self.next_p, self.router = routing(plan)
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
            self.job_id, settings.policy, self.storage_access, self.store, self.cleaner,
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
                    self._failover(exc)
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

    def _run_one_epoch(self, stop_request: Any) -> bool:
        ranges = self._plan_ranges()
        end_of_input = self._end_of_input(ranges)
        drain = isinstance(stop_request, _Request) and stop_request.drain
        has_data = any(ranges.values())
        if not has_data and not end_of_input and stop_request is None and not self.restore_spec:
            time.sleep(self.s.idle_sleep_s)
            idle_ms = self.clock.monotonic_ms() - self._last_epoch_end_ms
            if not self.coordinator.is_due() and idle_ms < self.s.idle_epoch_interval_s * 1000:
                return False
        self.epoch += 1
        if self.s.before_epoch is not None:
            self.s.before_epoch(self, self.epoch)
        pending = None
        if isinstance(stop_request, _Request):
            pending = self.coordinator.trigger(
                self.epoch,
                stop_request.target,
                is_savepoint=True,
                synchronous=stop_request.kind == "stop",
            )
        elif self.coordinator.is_due() and not end_of_input:
            pending = self.coordinator.trigger(self.epoch)
        checkpoint = None
        if pending is not None:
            checkpoint = CheckpointRequest(
                pending.checkpoint_id,
                self.s.checkpoint_storage,
                pending.location.get_location_reference(),
                SnapshotType.SAVEPOINT
                if pending.properties.is_savepoint
                else SnapshotType.FULL_CHECKPOINT
                if self.store.forces_full_snapshot
                else SnapshotType.CHECKPOINT,
            )
        spec = EpochSpec(
            job_id=self.job_id,
            job_name=self.s.job_name,
            epoch=self.epoch,
            incarnation=self.incarnation,
            end_of_input=end_of_input or drain,
            batch_mode=self.s.batch_mode,
            watermarks=dict(self.watermarks),
            generator_state=dict(self.generators),
            state_backend=self.s.state_backend,
            local_root=self.s.local_root,
            source_ranges=ranges,
            processing_time_ms=self.clock.now_ms(),
            checkpoint=checkpoint,
            restore=self.restore_spec,
            notify_complete=self.notify_complete,
            job_parameters=self.s.job_parameters,
            final_stage_ids=self.finals,
            next_parallelism=self.next_p,
            next_router=self.router,
            fs_options=dict(get_fs_options()),
            after_local_commit=self.s.after_local_commit,
        )
        t0 = time.perf_counter()
        try:
            rows = run_epoch(self.spark, self.plan, spec)
        except BaseException:
            if pending is not None:
                self.coordinator.abort_all(CheckpointFailureReason.TASK_FAILURE)
            if isinstance(stop_request, _Request):
                self.requests.put(stop_request)  # retry after the restore
            raise
        self.epoch_seconds.append(time.perf_counter() - t0)
        self._last_epoch_end_ms = self.clock.monotonic_ms()
        self.epochs_run += 1
        acks = self._absorb(rows, ranges)
        self.restore_spec = None
        if pending is not None:
            self._complete_checkpoint(pending, acks, stop_request)
        elif not self.s.policy.enabled:
            self._commit_up_to(self.epoch)
        if isinstance(stop_request, _Request) and stop_request.kind == "stop":
            self._terminate(JobStatus.FINISHED, commit=True)
            raise CancelledByRequest()
        return end_of_input

    def _absorb(
        self, rows: list[tuple[int, int, bytes]], ranges: dict[int, list[SplitRange]]
    ) -> Any:
        import pickle

        acks: list[tuple[str, int, Any, int]] = []
        for _sub, kind, payload in rows:
            if kind == KIND_ACK:
                acks.extend(pickle.loads(payload))
            elif kind == KIND_COMMITTABLE:
                op_id, _subtask, committables = pickle.loads(payload)
                self.pending_commits.append((self.epoch, op_id, committables))
            elif kind == KIND_COLLECT:
                op_id, _subtask, committables = pickle.loads(payload)
                self.sinks[op_id].commit(committables)
            elif kind == KIND_META:
                meta = pickle.loads(payload)
                self.watermarks.update(meta["watermarks"])
                for key, max_ts in meta["max_ts"].items():
                    if max_ts is not None:
                        op = key.partition("@")[0]
                        self.generators[op] = max(self.generators.get(op, max_ts), max_ts)
            elif kind == KIND_STATS:
                st = pickle.loads(payload)
                if st["stage"] in self.stage_of_source.values():
                    self.records_in += st["records_in"]
        for op_id, enum in self.enumerators.items():
            enum.commit_epoch(ranges[self.stage_of_source[op_id]])
        return acks

    # -- checkpoints -----------------------------------------------------------------------
    def _operator_states(self, acks: list[tuple[str, int, Any, int]]) -> list[OperatorState]:
        by_op: dict[str, dict[int, OperatorSubtaskState]] = {}
        for op_id, subtask, handle, _size in acks:
            handles = (handle,) if handle is not None else ()
            by_op.setdefault(op_id, {})[subtask] = OperatorSubtaskState(managed_keyed_state=handles)
        states = []
        for st in self.plan.stages:
            for node in st.keyed_nodes:
                subs = by_op.get(node.operator_id, {})
                missing = [i for i in range(st.parallelism) if i not in subs]
                if missing:
                    raise CheckpointException(
                        CheckpointFailureReason.CHECKPOINT_DECLINED,
                        f"operator {node.operator_id}: no snapshot from subtasks {missing}",
                    )
                states.append(
                    OperatorState(node.operator_id, st.parallelism, st.max_parallelism, subs)
                )
        return states

    def _master_states(self, up_to_epoch: int) -> list[MasterState]:
        sinks = [
            [op_id, committables]
            for epoch, op_id, committables in self.pending_commits
            if epoch <= up_to_epoch
        ]
        state = {
            "job_id": self.job_id,
            "job_name": self.s.job_name,
            "epoch": up_to_epoch,
            "sources": {op: e.snapshot_state() for op, e in self.enumerators.items()},
            "watermarks": self.watermarks,
            "generators": self.generators,
            "pending_sink_commits": sinks,
        }
        return [MasterState.from_json(_MASTER, state)]

    def _complete_checkpoint(self, pending: Any, acks: Any, stop_request: Any) -> None:
        try:
            op_states = self._operator_states(acks)
            completed = self.coordinator.complete(
                pending, op_states, self._master_states(self.epoch)
            )
        except CheckpointException as exc:
            failure: CheckpointException = exc
            if pending in self.coordinator.pending:
                handles = [a[2] for a in acks if a[2] is not None]
                try:
                    self.coordinator.abort(pending, exc.reason, str(exc), states=handles)
                except TolerableFailuresExceeded as exceeded:
                    failure = exceeded
            if isinstance(stop_request, _Request):
                stop_request.future.set_exception(failure)
            if isinstance(failure, TolerableFailuresExceeded):
                raise failure from exc  # the job fails over (restart strategy applies)
            return
        self.notify_complete = completed.checkpoint_id
        self._commit_up_to(self.epoch)
        if isinstance(stop_request, _Request):
            stop_request.future.set_result(completed.external_pointer)

    def _commit_up_to(self, epoch: int) -> None:
        keep = []
        by_sink: dict[str, list[Any]] = {}
        for e, op_id, committables in self.pending_commits:
            if e <= epoch:
                by_sink.setdefault(op_id, []).extend(committables)
            else:
                keep.append((e, op_id, committables))
        for op_id, committables in by_sink.items():
            self.sinks[op_id].commit(committables)
        self.pending_commits = keep

    # -- recovery --------------------------------------------------------------------------
    def _initial_restore(self) -> None:
        if self.s.restore_path is None:
            self.restore_spec = assign_keyed_state(self.plan, None, True)
            return
        metadata, location = load_checkpoint(self.s.checkpoint_storage, self.s.restore_path)
        check_unmatched_state(self.plan, metadata, self.s.allow_non_restored_state)
        restored = CompletedCheckpoint.from_metadata(self.job_id, metadata, location)
        self.store.add_restored_checkpoint(restored, self.s.claim_mode)
        self.coordinator.next_checkpoint_id = metadata.checkpoint_id + 1
        self._restore_from(metadata)
        _LOG.info("Job %s restored from %s", self.job_id, location.external_pointer)

    def _restore_from(self, metadata: CheckpointMetadata | None) -> None:
        self.restore_spec = assign_keyed_state(self.plan, metadata, self.s.explicit_max_parallelism)
        # The max parallelism may have been adopted from the checkpoint: re-derive routing.
        self.next_p, self.router = routing(self.plan)
        master_state = metadata.get_master_state(_MASTER) if metadata else None
        master = master_state.to_json() if master_state is not None else None
        if master is None:
            for enum in self.enumerators.values():
                enum.reset()
            self.watermarks, self.generators = {}, {}
            return
        for op_id, enum in self.enumerators.items():
            if op_id in master["sources"]:
                enum.restore_state(master["sources"][op_id])
            else:
                enum.reset()
        self.watermarks = dict(master["watermarks"])
        self.generators = dict(master["generators"])
        by_sink: dict[str, list[Any]] = {}
        for op_id, committables in master["pending_sink_commits"]:
            by_sink.setdefault(op_id, []).extend(
                tuple(c) if isinstance(c, list) else c for c in committables
            )
        for op_id, committables in by_sink.items():
            if op_id in self.sinks:
                self.sinks[op_id].commit(committables)

    def _failover(self, exc: BaseException) -> None:
        _LOG.warning("Job %s epoch %d failed: %s", self.job_id, self.epoch, _short(exc))
        self.restart.notify_failure(exc)
        if not self.restart.can_restart():
            self._terminate(JobStatus.FAILED)
            raise JobExecutionError(
                f"Job {self.s.job_name!r} ({self.job_id}) failed after {self.restarts} "
                f"restarts: {_short(exc)}"
            ) from exc
        self.status = JobStatus.RESTARTING
        backoff = self.restart.get_backoff_time_ms()
        if backoff > 0:
            time.sleep(backoff / 1000.0)
        self.restarts += 1
        self.incarnation += 1
        self._abort_uncommitted()
        latest = self._latest_for_recovery()
        self._restore_from(latest.metadata if latest is not None else None)
        if latest is not None:
            _LOG.info("Restored job %s from checkpoint %d", self.job_id, latest.checkpoint_id)
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
        by_sink: dict[str, list[Any]] = {}
        for _e, op_id, committables in self.pending_commits:
            by_sink.setdefault(op_id, []).extend(committables)
        for op_id, committables in by_sink.items():
            self.sinks[op_id].abort(committables)
        self.pending_commits = []
        self.coordinator.abort_all(CheckpointFailureReason.TASK_FAILURE)

    # -- the end ---------------------------------------------------------------------------
    def _finish(self) -> None:
        self._terminate(JobStatus.FINISHED, commit=True)

    def _terminate(self, status: str, commit: bool = False) -> None:
        if commit:
            self._commit_up_to(self.epoch)
        else:
            self._abort_uncommitted()
        self.coordinator.abort_all(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        self.store.shutdown(status, self.cleaner)
        for sink in self.sinks.values():
            cleanup = getattr(sink, "cleanup_job", None)
            if cleanup is not None:
                cleanup(self.job_id)
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
        shutil.rmtree(os.path.join(self.s.local_root, self.job_id), ignore_errors=True)



class CancelledByRequest(Exception):
    """Internal: the loop ends because a stop-with-savepoint finished the job."""


def _short(exc: BaseException) -> str:
    """The innermost Python exception line of a (Spark-wrapped) failure."""
    import re

    text = str(exc)
    found = [
        m
        for m in re.findall(r"^([\w.]+(?:Error|Exception|Failure|Exit)\b.*)$", text, re.MULTILINE)
        if not m.startswith(("org.", "java.", "scala.", "py4j.", "pyspark."))
    ]
    if found:
        return found[-1][:500]
    return text.splitlines()[0][:500] if text else type(exc).__name__
