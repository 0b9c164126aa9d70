"""Whole-job restores: the job's start (from nothing, or from ``execution.savepoint.path``)
and the failover after a failed epoch, where the restart strategy decides whether the job
goes on and every subtask then restores the latest completed checkpoint."""

from __future__ import annotations

import logging
import time

from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint
from sparkpoint.checkpoint.store import CompletedCheckpoint
from sparkpoint.clock import Clock
from sparkpoint.runtime.driver.changelog_checkpoints import ChangelogCheckpoints
from sparkpoint.runtime.driver.epoch_checkpoints import EpochCheckpoints
from sparkpoint.runtime.driver.failures import short_error, unloadable_task
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.reports import FailoverEvent
from sparkpoint.runtime.driver.restart import create_restart_backoff_strategy
from sparkpoint.runtime.driver.settings import JobSettings
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.driver.source_coordinator import SourceCoordinator
from sparkpoint.runtime.driver.start_state import StartState
from sparkpoint.runtime.driver.state_assignment import (
    assign_keyed_state,
    assign_operator_state,
    check_unmatched_state,
)
from sparkpoint.runtime.driver.subtask_recovery import SubtaskRecovery
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import RestoreReason, SubtaskRestore

__all__ = ["JobRestore"]

_LOG = logging.getLogger("sparkpoint.job")


class JobRestore:
    """Restores one job as a whole: at its start and at every failover."""

    def __init__(
        self,
        plan: Plan,
        settings: JobSettings,
        clock: Clock,
        checkpoints: EpochCheckpoints,
        sources: SourceCoordinator,
        sink_commits: SinkCommits,
        recovery: SubtaskRecovery,
        changelog: ChangelogCheckpoints,
        progress: JobProgress,
    ) -> None:
        self._plan = plan
        self._s = settings
        self._checkpoints = checkpoints
        self._sources = sources
        self._sink_commits = sink_commits
        self._recovery = recovery
        self._changelog = changelog
        self._restart = create_restart_backoff_strategy(
            settings.restart_strategy, checkpointing_enabled=settings.policy.enabled, clock=clock
        )
        self._progress = progress

    def initial(self) -> StartState:
        """What the job's first epoch starts from: nothing, or the configured savepoint
        (or retained checkpoint), which the checkpoint store then holds."""
        job_id = self._progress.job_id
        if self._s.restore_path is None:
            start = self._restore_from(None, RestoreReason.START)
            self._recovery.reset(None, 0)
            self._changelog.reset()
            return start
        metadata, location = load_checkpoint(self._s.checkpoint_storage, self._s.restore_path)
        check_unmatched_state(self._plan, metadata, self._s.allow_non_restored_state)
        restored = CompletedCheckpoint.from_metadata(job_id, metadata, location)
        self._checkpoints.add_restored(restored, self._s.claim_mode)
        start = self._restore_from(metadata, RestoreReason.START, restored.external_pointer)
        self._recovery.reset(restored, 0)
        self._changelog.reset()
        _LOG.info("Job %s restored from %s", job_id, location.external_pointer)
        return start

    def cannot_restart(self, exc: BaseException, epoch: int) -> str | None:
        """Log the failure of ``epoch``; why the job must fail instead of restarting (the
        restart strategy says no, or no restart can fix it), None if it may restart."""
        job_id = self._progress.job_id
        _LOG.warning("Job %s epoch %d failed: %s", job_id, epoch, short_error(exc))
        _LOG.debug("Job %s epoch %d failed; the whole error:", job_id, epoch, exc_info=exc)
        unloadable = unloadable_task(exc)
        if unloadable is not None:
            return f"Job {self._s.job_name!r} ({job_id}) cannot run: {unloadable}."
        self._restart.notify_failure(exc)
        if not self._restart.can_restart():
            return (
                f"Job {self._s.job_name!r} ({job_id}) failed after {self._progress.restarts} "
                f"restarts: {short_error(exc)}"
            )
        return None

    def back_off(self) -> None:
        """Wait the restart strategy's backoff time before the restore."""
        backoff = self._restart.get_backoff_time_ms()
        if backoff > 0:
            time.sleep(backoff / 1000.0)

    def roll_back(self, exc: BaseException, epoch: int, incarnation: int) -> StartState:
        """Restore every subtask from the latest completed checkpoint (or the start): the
        state the job continues with after ``epoch`` failed with ``exc``."""
        latest = self._checkpoints.latest_for_recovery()
        start = self._restore_from(
            latest.metadata if latest is not None else None,
            RestoreReason.FAILOVER,
            latest.external_pointer if latest is not None else "",
        )
        self._recovery.reset(latest, epoch)
        self._changelog.reset()
        self._progress.failed_over(
            FailoverEvent(
                epoch, incarnation, latest.checkpoint_id if latest else None, short_error(exc)
            )
        )
        _LOG.info(
            "Job %s failed over to %s",
            self._progress.job_id,
            f"checkpoint {latest.checkpoint_id}" if latest is not None else "the start",
        )
        return start

    def _restore_from(
        self, metadata: CheckpointMetadata | None, reason: RestoreReason, pointer: str = ""
    ) -> StartState:
        assigned = assign_keyed_state(self._plan, metadata, self._s.explicit_max_parallelism)
        start = StartState(
            restore={
                op: {sub: SubtaskRestore(tuple(hs), reason=reason) for sub, hs in subs.items()}
                for op, subs in assigned.items()
            },
            operator_state=assign_operator_state(self._plan, metadata),
        )
        master = JobMasterState.from_metadata(metadata)
        self._sources.restore_state(
            master.sources if master is not None else None, f"{pointer}/_metadata"
        )
        if master is not None:
            start.watermarks = dict(master.watermarks)
            start.generators = dict(master.generators)
            self._sink_commits.recommit(master.pending_sink_commits)
        return start
