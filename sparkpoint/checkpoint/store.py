"""``CompletedCheckpoint`` and ``CompletedCheckpointStore``: retention and subsumption.

Semantics of Flink's ``StandaloneCompletedCheckpointStore`` and ``CheckpointSubsumeHelper``:

- at most ``max_retained`` checkpoints are kept; savepoints count toward that number but
  their state is never discarded by the job;
- the latest checkpoint that is not a savepoint is always kept (later incremental
  checkpoints may reference its files), unless the latest entry is a stop-with-savepoint;
- after subsumption, shared state last used before the lowest retained checkpoint is
  discarded through the ``SharedStateRegistry``;
- on a globally terminal job status (FINISHED, CANCELED, FAILED) each checkpoint is
  discarded or kept according to its properties; SUSPENDED keeps everything, since the job
  may resume from it;
- after a restored snapshot is added, checkpoints must be full (share no file with it)
  until one completes: Flink's rule for NO_CLAIM, applied in every claim mode here, so
  every checkpoint's files lie in its own job directory (``paths.SnapshotPaths``).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.handles import StateObject, discard_quietly
from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState, OperatorState
from sparkpoint.checkpoint.properties import CheckpointProperties, JobStatus
from sparkpoint.checkpoint.shared_registry import RecoveryClaimMode, SharedStateRegistry
from sparkpoint.checkpoint.storage import CompletedCheckpointStorageLocation

__all__ = ["CompletedCheckpoint", "CompletedCheckpointStore"]

_LOG = logging.getLogger(__name__)
_GLOBALLY_TERMINAL = (JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED)


@dataclass(eq=False)
class CompletedCheckpoint:
    """A checkpoint (or savepoint) whose ``_metadata`` has been written."""

    job_id: str
    checkpoint_id: int
    timestamp_ms: int
    completion_timestamp_ms: int
    operator_states: tuple[OperatorState, ...]
    properties: CheckpointProperties
    location: CompletedCheckpointStorageLocation
    metadata: CheckpointMetadata | None = None
    master_states: tuple[MasterState, ...] = ()
    _discarded: bool = field(default=False, init=False, repr=False)

    @staticmethod
    def from_metadata(
        job_id: str,
        metadata: CheckpointMetadata,
        location: CompletedCheckpointStorageLocation,
        properties: CheckpointProperties | None = None,
        timestamp_ms: int = 0,
        completion_timestamp_ms: int = 0,
    ) -> CompletedCheckpoint:
        """A completed checkpoint loaded from ``_metadata`` (e.g. when restoring)."""
        props = properties or metadata.properties or CheckpointProperties.for_savepoint()
        return CompletedCheckpoint(
            job_id,
            metadata.checkpoint_id,
            timestamp_ms,
            completion_timestamp_ms,
            metadata.operator_states,
            props,
            location,
            metadata,
            metadata.master_states,
        )

    @property
    def external_pointer(self) -> str:
        """The pointer to pass back to ``resolve_checkpoint`` (checkpoint directory)."""
        return self.location.external_pointer

    @property
    def state_size(self) -> int:
        """Total bytes of operator state (no I/O)."""
        return sum(op.state_size for op in self.operator_states)

    @property
    def is_discarded(self) -> bool:
        """Whether ``discard`` has run."""
        return self._discarded

    def should_be_discarded_on_subsume(self) -> bool:
        """Whether subsumption deletes this checkpoint (never for savepoints)."""
        return self.properties.discard_subsumed

    def should_be_discarded_on_shutdown(self, job_status: JobStatus | str) -> bool:
        """Whether the job ending in ``job_status`` deletes this checkpoint (the matrix)."""
        return self.properties.discard_on_job_status(job_status)

    def discard_on_subsume(self) -> bool:
        """Discard now if the properties say so on subsumption; whether it was discarded."""
        if self.should_be_discarded_on_subsume():
            self.discard()
            return True
        return False

    def discard_on_shutdown(self, job_status: JobStatus | str) -> bool:
        """Discard now if the properties say so for ``job_status``; whether it was."""
        if self.should_be_discarded_on_shutdown(job_status):
            self.discard()
            return True
        return False

    def discard_parts(self) -> tuple[list[StateObject], Callable[[], None]]:
        """The state objects to discard and the final step (metadata and directory)."""
        states: list[StateObject] = []
        for op in self.operator_states:
            for sub in op.subtask_states.values():
                states.extend(sub.all_handles())
            if op.coordinator_state is not None:
                states.append(op.coordinator_state)

        def finish() -> None:
            self._discarded = True
            discard_quietly([self.location.metadata_handle])
            self.location.dispose_storage_location()

        return states, finish

    def discard(self) -> None:
        """Delete the checkpoint's own state, its ``_metadata`` and its directory.

        Shared state (incremental files in ``shared/``) is left to the shared-state registry.
        """
        states, finish = self.discard_parts()
        discard_quietly(states)
        finish()

    def __repr__(self) -> str:
        kind = "Savepoint" if self.properties.is_savepoint else "Checkpoint"
        return f"{kind} {self.checkpoint_id} @ {self.external_pointer} for {self.job_id}"


class CompletedCheckpointStore:
    """The retained completed checkpoints of one job, oldest first (standalone, in memory)."""

    def __init__(
        self,
        max_retained: int = 1,
        shared_state_registry: SharedStateRegistry | None = None,
    ) -> None:
        if max_retained < 1:
            raise ValueError(
                f"Must retain at least one checkpoint (execution.checkpointing.num-retained), "
                f"got {max_retained}"
            )
        self._max_retained = max_retained
        self._checkpoints: collections.deque[CompletedCheckpoint] = collections.deque()
        self._registry = (
            shared_state_registry if shared_state_registry is not None else SharedStateRegistry()
        )
        self._lock = threading.RLock()
        self._force_full = False

    @property
    def max_retained(self) -> int:
        """How many checkpoints are retained."""
        return self._max_retained

    @property
    def shared_state_registry(self) -> SharedStateRegistry:
        """The registry of shared state used by the retained checkpoints."""
        return self._registry

    def add_checkpoint_and_subsume_oldest(
        self,
        checkpoint: CompletedCheckpoint,
        cleaner: CheckpointsCleaner | None = None,
        post_cleanup: Callable[[], None] | None = None,
    ) -> CompletedCheckpoint | None:
        """Add ``checkpoint``, subsume the oldest beyond ``max_retained`` and return the
        subsumed checkpoint with the highest id (``None`` if none was subsumed).

        Shared state is registered (idempotently) before subsumption. Subsumed checkpoints
        are discarded through ``cleaner`` (in the background), or here when ``None``.
        """
        with self._lock:
            latest_id = self._checkpoints[-1].checkpoint_id if self._checkpoints else None
            if latest_id is not None and checkpoint.checkpoint_id <= latest_id:
                raise ValueError(
                    f"Checkpoint {checkpoint.checkpoint_id} is not newer than the latest "
                    f"retained checkpoint {latest_id}"
                )
            resolved = self._registry.register_all(
                checkpoint.operator_states, checkpoint.checkpoint_id
            )
            checkpoint.operator_states = resolved
            self._checkpoints.append(checkpoint)
            if not checkpoint.properties.is_savepoint:
                self._force_full = False
            subsumed = self._subsume()
            lowest = self._lowest_non_savepoint_id()
            if lowest is not None:
                self._registry.unregister_unused_state(lowest)
        for old in subsumed:
            if cleaner is not None:
                cleaner.add_subsumed_checkpoint(old)
            else:
                old.discard_on_subsume()
        if cleaner is not None and subsumed:
            cleaner.clean_subsumed_checkpoints(post_cleanup=post_cleanup)
        elif post_cleanup is not None:
            post_cleanup()
        return max(subsumed, key=lambda c: c.checkpoint_id) if subsumed else None

    def add_restored_checkpoint(
        self,
        checkpoint: CompletedCheckpoint,
        claim_mode: object = RecoveryClaimMode.NO_CLAIM,
        cleaner: CheckpointsCleaner | None = None,
    ) -> CompletedCheckpoint | None:
        """Add a checkpoint/savepoint the job restores from.

        NO_CLAIM (default) and LEGACY: the job never deletes its files (shared files it
        created stay even once unused). CLAIM: the job owns it and deletes it when subsumed,
        unless it is a savepoint (never deleted by a job; it may name files of the snapshot
        it was made from). In every mode the next checkpoints are full until one completes
        (``forces_full_snapshot``).
        """
        mode = RecoveryClaimMode.of(claim_mode)
        if checkpoint.properties.is_savepoint:
            mode = RecoveryClaimMode.NO_CLAIM
        if mode != RecoveryClaimMode.CLAIM:
            checkpoint = dataclasses.replace(
                checkpoint, properties=CheckpointProperties.for_unclaimed_snapshot()
            )
        with self._lock:
            checkpoint.operator_states = self._registry.register_all_after_restore(checkpoint, mode)
        subsumed = self.add_checkpoint_and_subsume_oldest(checkpoint, cleaner)
        with self._lock:
            self._force_full = True
        return subsumed

    @property
    def forces_full_snapshot(self) -> bool:
        """Whether a checkpoint triggered now must be full (``SnapshotType.FULL_CHECKPOINT``):
        a snapshot was restored and no checkpoint has completed since. A full checkpoint
        references no file of the restored snapshot, which the user may then delete."""
        with self._lock:
            return self._force_full

    def _subsume(self) -> list[CompletedCheckpoint]:
        """Flink's CheckpointSubsumeHelper.subsume over the deque (lock held)."""
        checkpoints = self._checkpoints
        if len(checkpoints) <= self._max_retained:
            return []
        latest = checkpoints[-1]
        latest_not_savepoint = next(
            (c for c in reversed(checkpoints) if not c.properties.is_savepoint), None
        )
        subsumed: list[CompletedCheckpoint] = []
        for candidate in list(checkpoints):
            if len(checkpoints) <= self._max_retained:
                break
            if candidate is latest:
                continue
            can_subsume = (
                candidate.properties.is_savepoint
                or latest.properties.is_synchronous
                or candidate is not latest_not_savepoint
            )
            if can_subsume:
                checkpoints.remove(candidate)
                subsumed.append(candidate)
        return subsumed

    def _lowest_non_savepoint_id(self) -> int | None:
        for c in self._checkpoints:
            if not c.properties.is_savepoint:
                return c.checkpoint_id
        return None

    def get_latest_checkpoint(self) -> CompletedCheckpoint | None:
        """The most recently added checkpoint (``None`` when empty)."""
        with self._lock:
            return self._checkpoints[-1] if self._checkpoints else None

    def get_latest_checkpoint_id(self) -> int:
        """The id of the latest checkpoint, or 0 when empty."""
        latest = self.get_latest_checkpoint()
        return 0 if latest is None else latest.checkpoint_id

    def get_all_checkpoints(self) -> list[CompletedCheckpoint]:
        """The retained checkpoints, oldest first."""
        with self._lock:
            return list(self._checkpoints)

    def get_number_of_retained_checkpoints(self) -> int:
        """How many checkpoints are retained now."""
        with self._lock:
            return len(self._checkpoints)

    def shutdown(
        self, job_status: JobStatus | str, cleaner: CheckpointsCleaner | None = None
    ) -> list[CompletedCheckpoint]:
        """The job ended in ``job_status``: discard per the matrix; returns those kept.

        Only globally terminal statuses (FINISHED, CANCELED, FAILED) discard anything; after
        SUSPENDED every checkpoint stays so the job can resume from it.
        """
        status = JobStatus.of(job_status)
        with self._lock:
            checkpoints = list(self._checkpoints)
            if status not in _GLOBALLY_TERMINAL:
                _LOG.info("Job %s: keeping %d checkpoints", status.name, len(checkpoints))
                return checkpoints
            kept: list[CompletedCheckpoint] = []
            lowest_retained = None
            for checkpoint in checkpoints:
                if checkpoint.should_be_discarded_on_shutdown(status):
                    checkpoint.discard()
                else:
                    _LOG.info(
                        "Checkpoint %d at %s not discarded",
                        checkpoint.checkpoint_id,
                        checkpoint.external_pointer,
                    )
                    kept.append(checkpoint)
                    # Savepoints use no registered shared state; only kept checkpoints
                    # protect shared files.
                    if not checkpoint.properties.is_savepoint and lowest_retained is None:
                        lowest_retained = checkpoint.checkpoint_id
            self._registry.unregister_unused_state(
                lowest_retained if lowest_retained is not None else 2**63 - 1
            )
            self._registry.close()
            self._checkpoints.clear()
        if cleaner is not None:
            cleaner.wait_until_idle()
        return kept

    def __len__(self) -> int:
        return self.get_number_of_retained_checkpoints()
