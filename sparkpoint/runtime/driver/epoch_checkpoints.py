"""The checkpoints of a job's epochs: which checkpoint (or savepoint) a run snapshots into,
the request its tasks get, and how the acknowledged snapshots of an accepted epoch (or the
asynchronous uploads of later epochs) complete it through the coordinator, or abort it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint
from sparkpoint.checkpoint.stats import CheckpointStats
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore
from sparkpoint.clock import Clock
from sparkpoint.errors import CheckpointException, CheckpointFailureReason
from sparkpoint.runtime.driver.changelog_checkpoints import ChangelogCheckpoints
from sparkpoint.runtime.driver.coordinator import CheckpointCoordinator, TolerableFailuresExceeded
from sparkpoint.runtime.driver.job_requests import ClientRequest, RequestKind
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.pending_checkpoint import PendingCheckpoint
from sparkpoint.runtime.driver.settings import JobSettings
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.driver.state_assignment import key_hash_rules
from sparkpoint.runtime.driver.subtask_recovery import SubtaskRecovery
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import CheckpointRequest, TaskReport
from sparkpoint.state.backend import SnapshotType
from sparkpoint.state.key_hash_rules import key_hash_master_state

__all__ = ["EpochCheckpoints"]


class EpochCheckpoints:
    """Triggers, requests and completes the checkpoints of one job's epochs."""

    def __init__(
        self,
        job_id: str,
        plan: Plan,
        settings: JobSettings,
        changelog: ChangelogCheckpoints,
        recovery: SubtaskRecovery,
        sink_commits: SinkCommits,
        clock: Clock,
        on_complete: Callable[[int, Mapping[str, Any]], None] | None = None,
    ) -> None:
        self._plan = plan
        # Told each completed checkpoint's id and split positions (the sources' notice).
        self._on_complete = on_complete
        self._s = settings
        self._changelog = changelog
        self._recovery = recovery
        self._sink_commits = sink_commits
        self._clock = clock
        self.storage_access = settings.checkpoint_storage.create_checkpoint_storage(job_id)
        self.store = CompletedCheckpointStore(max(1, settings.num_retained))
        self._cleaner = CheckpointsCleaner()
        self.coordinator = CheckpointCoordinator(
            job_id, settings.policy, self.storage_access, self.store, self._cleaner, clock=clock
        )
        self.notify_complete: int | None = None  # the latest completed checkpoint's id
        self.checkpointed_epoch = 0  # epoch of the latest completed checkpoint

    def statistics(self) -> list[CheckpointStats]:
        """Every triggered checkpoint's statistics, oldest first (copies)."""
        return self.coordinator.statistics()

    def add_restored(self, checkpoint: CompletedCheckpoint, claim_mode: str) -> None:
        """The job starts from ``checkpoint`` (a savepoint or retained checkpoint): the
        store holds it as ``claim_mode`` says, and checkpoint ids go on after its id."""
        self.store.add_restored_checkpoint(checkpoint, claim_mode)
        self.coordinator.next_checkpoint_id = checkpoint.checkpoint_id + 1

    def latest_for_recovery(self) -> CompletedCheckpoint | None:
        """The completed checkpoint a failover restores (None: the job starts over); with
        ``prefer_checkpoint_for_recovery`` the latest that is not a savepoint."""
        checkpoints = self.store.get_all_checkpoints()
        if not checkpoints:
            return None
        if self._s.policy.prefer_checkpoint_for_recovery:
            for cp in reversed(checkpoints):
                if not cp.properties.is_savepoint:
                    return cp
        latest = checkpoints[-1]
        if latest.metadata is None:
            metadata, _ = load_checkpoint(
                self.storage_access, latest.external_pointer, trust=self._s.policy.trust
            )
            latest.metadata = metadata
        return latest

    def initialize_storage(self) -> None:
        """Create the job's checkpoint directories (when periodic checkpoints are on)."""
        if self._s.policy.enabled:
            self.storage_access.initialize_base_locations_for_checkpoint()

    def is_due(self) -> bool:
        """Whether a periodic checkpoint may be triggered now."""
        return self.coordinator.is_due()

    def pending_ids(self) -> frozenset[int]:
        """The checkpoints still pending (their tasks may still upload)."""
        return frozenset(p.checkpoint_id for p in self.coordinator.pending)

    def recently_aborted(self) -> frozenset[int]:
        """The latest aborted checkpoints (a late upload deletes its own files)."""
        return frozenset(self.coordinator.recently_aborted)

    def abort_all(self, reason: CheckpointFailureReason) -> None:
        """Abort every pending checkpoint (a failed run, a failover, the job's end)."""
        self.coordinator.abort_all(reason)

    def shutdown(self, status: str) -> None:
        """The job ended with ``status``: abort what is pending and keep or discard the
        completed checkpoints as their retention says."""
        self.coordinator.abort_all(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        self.store.shutdown(status, self._cleaner)

    def close(self) -> None:
        """Stop the cleaner (after its pending deletions)."""
        self._cleaner.close()

    def trigger(
        self,
        epoch: int,
        stop_request: ClientRequest | None,
        end_of_input: bool,
        planned_at_ms: int | None = None,
    ) -> PendingCheckpoint | None:
        """The checkpoint (or savepoint) this run of the epoch snapshots into, if any. A
        savepoint that cannot be triggered fails its request (the job goes on, as in
        Flink); a checkpoint that cannot be, only itself (the coordinator recorded it).
        ``planned_at_ms``: when the epoch's ranges were read (the barrier's position), the
        checkpoint's trigger time for its interval."""
        try:
            if stop_request is not None:
                return self.coordinator.trigger(
                    epoch,
                    stop_request.target,
                    is_savepoint=True,
                    synchronous=stop_request.kind == RequestKind.STOP,
                )
            if self.coordinator.is_due() and not end_of_input:
                return self.coordinator.trigger(epoch, triggered_at_ms=planned_at_ms)
        except CheckpointException as exc:
            if stop_request is not None:
                stop_request.future.set_exception(exc)
        return None

    def request_for(
        self, pending: PendingCheckpoint | None, end_of_input: bool
    ) -> CheckpointRequest | None:
        """What the tasks of a run snapshot for ``pending`` (decided per run: whether it
        uploads in the background, whether keyed subtasks materialize)."""
        if pending is None:
            return None
        savepoint = pending.properties.is_savepoint
        # Savepoints upload within their epoch (stop-with-savepoint ends the job with it).
        pending.asynchronous = not savepoint and self._s.state_backend.asynchronous_snapshots()
        full = self.store.forces_full_snapshot
        now_ms = self._clock.monotonic_ms()
        pending.materialize = (
            savepoint
            or full
            or self._changelog.should_materialize(
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
            and self._changelog.start_background(pending.checkpoint_id, now_ms)
        )
        return CheckpointRequest(
            pending.checkpoint_id,
            self._s.checkpoint_storage,
            pending.location.get_location_reference(),
            SnapshotType.SAVEPOINT
            if savepoint
            else SnapshotType.FULL_CHECKPOINT
            if full
            else SnapshotType.CHECKPOINT,
            asynchronous=pending.asynchronous,
            materialize=pending.materialize,
            materialize_in_background=pending.materialize_in_background,
            upload_wait_ms=self._s.upload_wait_ms if pending.asynchronous else 0,
        )

    def abort_run(
        self, pending: PendingCheckpoint | None, detail: str, reports: Sequence[TaskReport] = ()
    ) -> None:
        """A run that snapshot into ``pending`` is discarded: abort it (a task failure),
        discarding the snapshots of ``reports``."""
        if pending is not None and pending in self.coordinator.pending:
            handles = [a.handle for r in reports for a in r.snapshots if a.handle is not None]
            self.coordinator.abort(
                pending, CheckpointFailureReason.TASK_FAILURE, detail, states=handles
            )

    def epoch_accepted(
        self,
        epoch: int,
        reports: Sequence[TaskReport],
        pending: PendingCheckpoint | None,
        master_state: JobMasterState | None,
    ) -> tuple[int, int]:
        """An epoch's run was accepted: take its changelog entries and materializations,
        the snapshots for ``pending`` (with the job's ``master_state`` as of the epoch),
        and the upload statuses of earlier checkpoints. Returns the asynchronous uploads
        (still running, completed in this epoch)."""
        changelogs = [a for r in reports for a in r.changelogs]
        acks = [a for r in reports for a in r.snapshots]
        self._recovery.accept(changelogs)
        self._changelog.observe(changelogs)
        self._changelog.run_accepted(
            epoch,
            {(a.operator_id, a.subtask) for a in acks if a.changelog},
            pending.checkpoint_id if pending is not None else None,
        )
        self._changelog.advance(
            (m for r in reports for m in r.materializations), self._clock.monotonic_ms()
        )
        if pending is not None and master_state is not None:
            keyed_subtasks = {
                (node.operator_id, i)
                for st in self._plan.stages
                for node in st.keyed_nodes
                for i in range(st.parallelism)
            }
            pending.acknowledge_epoch(master_state, acks, keyed_subtasks)
        return self._advance_uploads(reports)

    def epoch_ended(
        self, epoch: int, pending: PendingCheckpoint | None, stop_request: ClientRequest | None
    ) -> CompletedCheckpoint | None:
        """Complete the synchronous checkpoint of the epoch just accepted, if any (None:
        there is none, or it failed, and the failure was recorded), and commit the sinks
        that commit without one."""
        completed = None
        policy = self._s.policy
        if pending is not None and not pending.asynchronous:
            completed = self._complete(pending, stop_request)
            if completed is not None:
                self._covered(completed, pending.epoch)
            else:
                self._recovery.checkpoint_failed()
        elif pending is None and not policy.enabled:
            self._sink_commits.commit_up_to(epoch)
        if policy.enabled and policy.at_least_once:
            # AT_LEAST_ONCE publishes every epoch's output now, checkpoint or not.
            self._sink_commits.commit_up_to(epoch)
        return completed

    def _advance_uploads(self, reports: Sequence[TaskReport]) -> tuple[int, int]:
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
            taken = pending.acknowledge_uploads(statuses)
            running += taken.running
            completed_now += taken.done
            failure = taken.failure
            timeout_ms = self._s.policy.timeout_ms
            if failure is None and pending.expired(self._clock.monotonic_ms(), timeout_ms):
                failure = (
                    CheckpointFailureReason.CHECKPOINT_EXPIRED,
                    f"uploads still running after {timeout_ms} ms",
                )
            if failure is not None:
                self.coordinator.abort(
                    pending, failure[0], failure[1], states=pending.acks_handles()
                )
            elif not pending.awaiting:
                self._complete_uploaded(pending)
        return running, completed_now

    def _complete_uploaded(self, pending: PendingCheckpoint) -> None:
        """Complete an asynchronous checkpoint all of whose uploads ended; it subsumes the
        older pending checkpoints."""
        completed = self._complete(pending, None)
        if completed is None:
            return
        self._covered(completed, pending.epoch)
        for older in list(self.coordinator.pending):
            if older.checkpoint_id < pending.checkpoint_id and not (older.properties.is_savepoint):
                self.coordinator.abort(
                    older,
                    CheckpointFailureReason.CHECKPOINT_SUBSUMED,
                    states=older.acks_handles(),
                )

    def _complete(
        self, pending: PendingCheckpoint, stop_request: ClientRequest | None
    ) -> CompletedCheckpoint | None:
        try:
            if self._changelog.enabled and not pending.properties.is_savepoint:
                pending.acks = self._changelog.compose(
                    pending.checkpoint_id, pending.epoch, pending.acks, self._recovery.entries
                )
            completed = self.coordinator.complete(
                pending,
                pending.operator_states(self._plan.stages),
                [*pending.master_states(), key_hash_master_state(key_hash_rules(self._plan))],
            )
        except CheckpointException as exc:
            failure: CheckpointException = exc
            if pending in self.coordinator.pending:
                try:
                    self.coordinator.abort(
                        pending, exc.reason, str(exc), states=pending.acks_handles()
                    )
                except TolerableFailuresExceeded as exceeded:
                    failure = exceeded
            if stop_request is not None:
                stop_request.future.set_exception(failure)
            if isinstance(failure, TolerableFailuresExceeded):
                raise failure from exc  # the job fails over (restart strategy applies)
            return None
        self.notify_complete = completed.checkpoint_id
        self.checkpointed_epoch = pending.epoch
        self._sink_commits.commit_up_to(pending.epoch)
        if self._on_complete is not None and pending.master_state is not None:
            self._on_complete(completed.checkpoint_id, pending.master_state.sources)
        if stop_request is not None:
            stop_request.future.set_result(completed.external_pointer)
        return completed

    def _covered(self, completed: CompletedCheckpoint, epoch: int) -> None:
        """``completed`` covers every epoch up to ``epoch``."""
        covered = self._recovery.checkpoint_completed(completed, epoch)
        if self._changelog.enabled:
            self._changelog.completed(completed, epoch, covered, self._clock.monotonic_ms())
