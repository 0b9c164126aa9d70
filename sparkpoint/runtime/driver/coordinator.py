"""The checkpoint coordinator: when to checkpoint, and how a checkpoint completes or fails.

It honours ``CheckpointConfig``: the interval, the minimum pause measured from the last
completion, the maximum of concurrent checkpoints, the timeout (an expired checkpoint is
aborted and its files removed) and the number of tolerable consecutive failures. Because an
epoch boundary is a barrier across all tasks, every checkpoint is aligned by construction.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.handles import StateObject
from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState, OperatorState
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.stats import CheckpointStats
from sparkpoint.checkpoint.storage import CheckpointStorageAccess
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore
from sparkpoint.checkpoint.trust import SnapshotTrust
from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.config import CheckpointingOptions
from sparkpoint.errors import CheckpointException, CheckpointFailureReason
from sparkpoint.runtime.driver.pending_checkpoint import PendingCheckpoint

__all__ = [
    "CheckpointCoordinator",
    "CheckpointPolicy",
    "CheckpointStats",
    "PendingCheckpoint",
    "TolerableFailuresExceeded",
    "next_due_on_schedule",
]

_LOG = logging.getLogger("sparkpoint.checkpoint")
_KEPT_ABORTED = 64  # aborted checkpoint ids remembered for executors (late uploads)


@dataclass(frozen=True)
class CheckpointPolicy:
    """The coordinator's view of ``CheckpointConfig`` (all times in milliseconds)."""

    interval_ms: int  # -1: periodic checkpoints disabled
    timeout_ms: int = CheckpointingOptions.CHECKPOINTING_TIMEOUT.default
    min_pause_ms: int = CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS.default
    max_concurrent: int = CheckpointingOptions.MAX_CONCURRENT_CHECKPOINTS.default
    tolerable_failures: int = CheckpointingOptions.TOLERABLE_FAILURE_NUMBER.default
    retention: str = CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION.default
    prefer_checkpoint_for_recovery: bool = (
        CheckpointingOptions.PREFER_CHECKPOINT_FOR_RECOVERY.default
    )
    at_least_once: bool = False
    """AT_LEAST_ONCE: sinks publish when an epoch ends, not when its checkpoint completes."""
    trust: SnapshotTrust = field(default_factory=SnapshotTrust)
    """sparkpoint.snapshot.*: the key every ``_metadata`` is signed with (else the checkpoint
    directory's origin key) and restores check."""

    @property
    def enabled(self) -> bool:
        """Whether periodic checkpoints are on."""
        return self.interval_ms > 0


class TolerableFailuresExceeded(CheckpointException):
    """More consecutive checkpoint failures than tolerated: the job must fail over."""


def next_due_on_schedule(due_ms: int, at_ms: int, interval_ms: int) -> int:
    """The next time on a fixed schedule of ``interval_ms`` after something due at
    ``due_ms`` happened at ``at_ms`` (Flink's periodic trigger: a late one does not delay
    the next; an early one, or one an interval late or more, starts the schedule anew)."""
    next_due = min(due_ms, at_ms) + interval_ms
    return next_due if next_due > at_ms else at_ms + interval_ms


def _handles(operator_states: Sequence[OperatorState]) -> list[StateObject]:
    return [
        h
        for op in operator_states
        for sub in op.subtask_states.values()
        for h in (*sub.managed_keyed_state, *sub.managed_operator_state)
    ]


class CheckpointCoordinator:
    """Triggers, completes and aborts checkpoints and savepoints of one job."""

    def __init__(
        self,
        job_id: str,
        policy: CheckpointPolicy,
        storage_access: CheckpointStorageAccess,
        store: CompletedCheckpointStore,
        cleaner: Any = None,
        first_checkpoint_id: int = 1,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.job_id = job_id
        self.policy = policy
        self.storage_access = storage_access
        self.store = store
        self.cleaner = cleaner
        self.clock = clock
        self.next_checkpoint_id = first_checkpoint_id
        self.pending: list[PendingCheckpoint] = []
        # Ids of the latest aborted checkpoints: an upload that ends after its checkpoint
        # was aborted deletes its own files when its executor learns of the abort.
        self.recently_aborted: deque[int] = deque(maxlen=_KEPT_ABORTED)
        self.stats: list[CheckpointStats] = []
        self.consecutive_failures = 0
        self._counted_ids: set[int] = set()
        self.last_success_id = 0
        self.last_trigger_ms: int | None = None
        self.last_completion_ms: int | None = None
        self.started_ms = clock.monotonic_ms()
        # When the next periodic checkpoint is due (Flink's nextCheckpointTriggeringRelativeTime):
        # a fixed schedule, so a trigger that comes late (at the next epoch's planning) does
        # not delay the ones after it.
        self.next_due_ms = self.started_ms + self.policy.interval_ms

    # -- triggering ------------------------------------------------------------------------
    def is_due(self) -> bool:
        """Whether a periodic checkpoint may be triggered now."""
        p = self.policy
        if not p.enabled or len(self.pending) >= p.max_concurrent:
            return False
        cleaning = getattr(self.cleaner, "get_number_of_checkpoints_to_clean", None)
        if cleaning is not None and cleaning() > p.max_concurrent:
            return False
        now = self.clock.monotonic_ms()
        if now < self.next_due_ms:
            return False
        if self.last_completion_ms is not None and now - self.last_completion_ms < p.min_pause_ms:
            return False
        return True

    def trigger(
        self,
        epoch: int,
        savepoint_target: str | None = None,
        is_savepoint: bool = False,
        synchronous: bool = False,
        triggered_at_ms: int | None = None,
    ) -> PendingCheckpoint:
        """Create the checkpoint's location and register it as pending. A periodic trigger,
        at ``triggered_at_ms`` (default now), moves the schedule on by one interval, as
        Flink's does: the next checkpoint is due an interval after this one was due, or, if
        this one came an interval late or more, an interval after it.

        A location that cannot be created (no savepoint directory, unreachable storage)
        fails this checkpoint alone, as Flink's trigger failures do: it is recorded as
        FAILED, not counted against the tolerable failures, and ``CheckpointException``
        (``TRIGGER_CHECKPOINT_FAILURE``) says why.
        """
        cid = self.next_checkpoint_id
        self.next_checkpoint_id += 1
        if not is_savepoint:
            now = self.clock.monotonic_ms()  # a failed one waits too
            at = now if triggered_at_ms is None else min(now, triggered_at_ms)
            self.last_trigger_ms = at
            self.next_due_ms = next_due_on_schedule(self.next_due_ms, at, self.policy.interval_ms)
        try:
            if is_savepoint:
                location = self.storage_access.initialize_location_for_savepoint(
                    cid, savepoint_target
                )
                props = (
                    CheckpointProperties.for_sync_savepoint(terminate=True)
                    if synchronous
                    else CheckpointProperties.for_savepoint()
                )
            else:
                location = self.storage_access.initialize_location_for_checkpoint(cid)
                props = CheckpointProperties.for_checkpoint(self.policy.retention)
        except Exception as exc:
            what = "savepoint" if is_savepoint else "checkpoint"
            detail = f"Could not create the {what}'s location: {exc}"
            stats = CheckpointStats(cid, is_savepoint, self.clock.now_ms(), epoch=epoch)
            stats.status = "FAILED"
            stats.failure = f"{CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE.name}: {detail}"
            stats.duration_ms = 0
            self.stats.append(stats)
            _LOG.warning("Checkpoint %d failed: %s", cid, stats.failure)
            raise CheckpointException(
                CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, detail, cid
            ) from exc
        pending = PendingCheckpoint(
            cid, self.clock.now_ms(), self.clock.monotonic_ms(), location, props, epoch
        )
        self.pending.append(pending)
        self.stats.append(CheckpointStats(cid, is_savepoint, pending.timestamp_ms, epoch=epoch))
        return pending

    def statistics(self) -> list[CheckpointStats]:
        """Every triggered checkpoint's statistics, oldest first (copies: the coordinator
        goes on updating its own from the job master's thread)."""
        return [s.copy() for s in list(self.stats)]

    # -- completion ------------------------------------------------------------------------
    def complete(
        self,
        pending: PendingCheckpoint,
        operator_states: Sequence[OperatorState],
        master_states: Sequence[MasterState],
    ) -> CompletedCheckpoint:
        """Write ``_metadata`` and add the checkpoint to the store (subsuming old ones).

        Raises ``CheckpointException`` (and aborts) when the checkpoint expired or failed.
        """
        stats = self._stats(pending.checkpoint_id)
        elapsed = self.clock.monotonic_ms() - pending.trigger_monotonic_ms
        if elapsed > self.policy.timeout_ms:
            self.abort(
                pending,
                CheckpointFailureReason.CHECKPOINT_EXPIRED,
                f"took {elapsed:.0f} ms, timeout {self.policy.timeout_ms} ms",
                states=_handles(operator_states),
            )
            raise CheckpointException(
                CheckpointFailureReason.CHECKPOINT_EXPIRED, checkpoint_id=pending.checkpoint_id
            )
        # Measured before placeholders are resolved (they count as state, not as uploads)
        # and stored in _metadata, so the history on storage equals the live figures.
        stats.add_measurement(operator_states)
        stats.duration_ms = int(self.clock.monotonic_ms() - pending.trigger_monotonic_ms)
        master_states = (*master_states, stats.to_master_state())
        try:
            # Registration swaps placeholders for the registered shared handles; it must
            # happen before _metadata is written, which refuses placeholders.
            operator_states = self.store.shared_state_registry.register_all(
                operator_states, pending.checkpoint_id
            )
            metadata = CheckpointMetadata(
                pending.checkpoint_id,
                tuple(operator_states),
                tuple(master_states),
                pending.properties,
            )
            completed_location = write_metadata(
                pending.location, metadata, signing_key=self.policy.trust.key_for_writing()
            )
        except Exception as exc:
            self.abort(
                pending,
                CheckpointFailureReason.IO_EXCEPTION,
                repr(exc),
                states=_handles(operator_states),
            )
            raise CheckpointException(
                CheckpointFailureReason.IO_EXCEPTION, repr(exc), pending.checkpoint_id
            ) from exc
        checkpoint = CompletedCheckpoint(
            job_id=self.job_id,
            checkpoint_id=pending.checkpoint_id,
            timestamp_ms=pending.timestamp_ms,
            completion_timestamp_ms=self.clock.now_ms(),
            operator_states=tuple(operator_states),
            properties=pending.properties,
            location=completed_location,
            metadata=metadata,
            master_states=tuple(master_states),
        )
        self.store.add_checkpoint_and_subsume_oldest(checkpoint, self.cleaner)
        self.pending.remove(pending)
        if not pending.properties.is_savepoint:
            self.last_completion_ms = self.clock.monotonic_ms()
        if pending.checkpoint_id > self.last_success_id:
            self.last_success_id = pending.checkpoint_id
            self.consecutive_failures = 0
            self._counted_ids.clear()
        stats.status = "COMPLETED"
        stats.external_pointer = completed_location.external_pointer
        _LOG.info(
            "%s %d completed in %d ms: state %d bytes (%d inline), %d state files, at %s",
            "Savepoint" if stats.is_savepoint else "Checkpoint",
            stats.checkpoint_id,
            stats.duration_ms,
            stats.state_size,
            stats.inline_bytes,
            stats.files_written,
            stats.external_pointer,
        )
        return checkpoint

    def abort(
        self,
        pending: PendingCheckpoint,
        reason: CheckpointFailureReason,
        detail: str = "",
        states: Sequence[StateObject] = (),
    ) -> None:
        """Discard a pending checkpoint's files (the acknowledged ``states``, unregistered
        shared uploads, its directory) and count the failure if it counts.

        Raises ``CheckpointException`` when the tolerable failure number is exceeded.
        """
        if pending in self.pending:
            self.pending.remove(pending)
        self.recently_aborted.append(pending.checkpoint_id)
        self._discard(pending, states)
        stats = self._stats(pending.checkpoint_id)
        stats.status = "FAILED"
        stats.failure = f"{reason.name}: {detail}"
        stats.duration_ms = int(self.clock.monotonic_ms() - pending.trigger_monotonic_ms)
        _LOG.warning("Checkpoint %d failed: %s %s", pending.checkpoint_id, reason.name, detail)
        if (
            reason.counts_as_failure
            and not pending.properties.is_savepoint
            and pending.checkpoint_id > self.last_success_id
            and pending.checkpoint_id not in self._counted_ids
        ):
            self._counted_ids.add(pending.checkpoint_id)
            self.consecutive_failures += 1
            if self.consecutive_failures > self.policy.tolerable_failures:
                self.consecutive_failures = 0
                self._counted_ids.clear()
                raise TolerableFailuresExceeded(
                    reason,
                    "Exceeded checkpoint tolerable failure threshold.",
                    pending.checkpoint_id,
                )

    def abort_all(self, reason: CheckpointFailureReason) -> None:
        """Abort every pending checkpoint without counting failures (job restart/stop)."""
        for pending in list(self.pending):
            self.pending.remove(pending)
            self.recently_aborted.append(pending.checkpoint_id)
            self._discard(pending, pending.acks_handles())
            stats = self._stats(pending.checkpoint_id)
            stats.status = "FAILED"
            stats.failure = reason.name

    def _discard(self, pending: PendingCheckpoint, states: Sequence[StateObject]) -> None:
        registry = self.store.shared_state_registry
        try:
            if self.cleaner is not None:
                self.cleaner.clean_aborted_checkpoint(
                    pending.checkpoint_id,
                    pending.location,
                    states,
                    shared_state_registry=registry,
                )
            else:
                for state in states:
                    state.discard()
                pending.location.dispose_on_failure()
        except Exception:
            _LOG.warning("Could not dispose checkpoint %d", pending.checkpoint_id, exc_info=True)

    def _stats(self, checkpoint_id: int) -> CheckpointStats:
        for s in reversed(self.stats):
            if s.checkpoint_id == checkpoint_id:
                return s
        raise KeyError(checkpoint_id)
