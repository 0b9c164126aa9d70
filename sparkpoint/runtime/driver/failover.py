"""Whole-job restores: the job's start (from nothing, or from ``execution.savepoint.path``)
and the failover after a failed epoch, where the restart strategy decides whether the job
goes on and every subtask then restores the latest completed checkpoint."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace

from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_file
from sparkpoint.checkpoint.storage import METADATA_FILE_NAME
from sparkpoint.checkpoint.store import CompletedCheckpoint
from sparkpoint.clock import Clock
from sparkpoint.errors import UnsafeStatePathError
from sparkpoint.runtime.driver.changelog_checkpoints import ChangelogCheckpoints
from sparkpoint.runtime.driver.epoch_checkpoints import EpochCheckpoints
from sparkpoint.runtime.driver.failures import (
    access_denied,
    records_deleted,
    restore_failure,
    short_error,
    unloadable_task,
    worker_crash,
)
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.reports import FailoverEvent
from sparkpoint.runtime.driver.restart import create_restart_backoff_strategy
from sparkpoint.runtime.driver.settings import JobSettings
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.driver.snapshot_origin import (
    restore_trusted,
    untrusted_commits_note,
    untrusted_restore_note,
)
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


def metadata_file(pointer: str) -> str:
    """The ``_metadata`` file of a snapshot pointer (its directory or the file itself)."""
    if pointer.rstrip("/").endswith("/" + METADATA_FILE_NAME):
        return pointer
    return f"{pointer.rstrip('/')}/{METADATA_FILE_NAME}"


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
        self._restore_failures: dict[str, int] = {}  # snapshot -> its failed restores
        # The snapshot the job started from when it is neither trusted nor vouched for
        # (allow-pickle true): its sink commits must be the restoring job's own.
        self._untrusted: str | None = None
        # Whether the job restored a snapshot and no epoch has succeeded since.
        self._unproven = False

    def initial(self) -> StartState:
        """What the job's first epoch starts from: nothing, or the configured savepoint
        (or retained checkpoint), which the checkpoint store then holds."""
        job_id = self._progress.job_id
        trust = self._s.policy.trust
        if self._s.restore_path is None:
            self._s.pickle_allowed = trust.pickle_allowed(True)
            start = self._restore_from(None, RestoreReason.START)
            self._recovery.reset(None, 0)
            self._changelog.reset()
            return start
        metadata, location, data = load_checkpoint_file(
            self._s.checkpoint_storage, self._s.restore_path, trust=trust
        )
        check_unmatched_state(self._plan, metadata, self._s.allow_non_restored_state)
        source = metadata_file(location.external_pointer)
        trusted = restore_trusted(trust, data, metadata, self._s.job_name, source)
        if not trusted and trust.allow_pickle is not True:
            self._untrusted = location.external_pointer
        self._check_master_state(metadata, location.external_pointer)
        self._trust_restore(trusted)
        restored = CompletedCheckpoint.from_metadata(job_id, metadata, location)
        self._checkpoints.add_restored(restored, self._s.claim_mode)
        self._unproven = True
        start = self._restore_from(metadata, RestoreReason.START, restored.external_pointer)
        self._recovery.reset(restored, 0)
        self._changelog.reset()
        _LOG.info("Job %s restored from %s", job_id, location.external_pointer)
        return start

    def _trust_restore(self, trusted: bool) -> None:
        """Read the restored state with pickle or as plain data (``allow-pickle``, else by
        origin); checkpoints of a run that read an untrusted snapshot as plain data are not
        signed as the job's own (its state may still hold the snapshot's pickles)."""
        trust = self._s.policy.trust
        self._s.pickle_allowed = trust.pickle_allowed(trusted)
        if self._untrusted is not None:
            if trust.origin_dir is not None and not trust.signed:
                coordinator = self._checkpoints.coordinator
                coordinator.policy = replace(
                    coordinator.policy, trust=replace(trust, origin_dir=None)
                )
            _LOG.warning(
                "Job %s: %s",
                self._progress.job_id,
                untrusted_restore_note(trust, str(self._s.restore_path)),
            )

    def cannot_restart(self, exc: BaseException, epoch: int) -> str | None:
        """Log the failure of ``epoch``; why the job must fail instead of restarting (the
        restart strategy says no, or no restart can fix it), None if it may restart."""
        job_id = self._progress.job_id
        _LOG.warning("Job %s epoch %d failed: %s", job_id, epoch, short_error(exc))
        _LOG.debug("Job %s epoch %d failed; the whole error:", job_id, epoch, exc_info=exc)
        unloadable = unloadable_task(exc)
        if unloadable is not None:
            return f"Job {self._s.job_name!r} ({job_id}) cannot run: {unloadable}."
        denied = access_denied(exc)
        if denied is not None:  # a missing ACL or refused credentials: a restart cannot help
            return f"Job {self._s.job_name!r} ({job_id}) cannot run: {denied}"
        deleted = records_deleted(exc)
        if deleted is not None:
            return f"Job {self._s.job_name!r} ({job_id}) failed: {deleted}"
        failed_restore = self._failed_restore(exc)
        if failed_restore is not None:
            return failed_restore
        self._restart.notify_failure(exc)
        if not self._restart.can_restart():
            return (
                f"Job {self._s.job_name!r} ({job_id}) failed after {self._progress.restarts} "
                f"restarts: {short_error(exc)}"
            )
        return None

    def _failed_restore(self, exc: BaseException) -> str | None:
        """Count a subtask's restore failure against the snapshot it restores (the latest
        checkpoint, or the start's savepoint), and so a Python worker's death before any
        epoch succeeded since the restore (a crash or hang the snapshot may cause, which a
        restart from it repeats); why the job fails once a snapshot has failed
        ``sparkpoint.restart.restore-attempts`` times, else None."""
        message = restore_failure(exc)
        if message is None and self._unproven:
            message = worker_crash(exc)
        if message is None:
            return None
        latest = self._checkpoints.latest_for_recovery()
        snapshot = latest.external_pointer if latest is not None else "the job's start"
        failures = self._restore_failures.get(snapshot, 0) + 1
        self._restore_failures[snapshot] = failures
        _LOG.warning(
            "Job %s: restoring %s failed (%d of %d attempts): %s",
            self._progress.job_id,
            snapshot,
            failures,
            self._s.restore_attempts,
            message,
        )
        if failures < self._s.restore_attempts:
            return None
        return (
            f"Job {self._s.job_name!r} ({self._progress.job_id}) failed: restoring {snapshot} "
            f"failed {failures} times (sparkpoint.restart.restore-attempts = "
            f"{self._s.restore_attempts}); the last error: {message}"
        )

    def epoch_accepted(self) -> None:
        """An epoch succeeded: the snapshot restored last is proven restorable."""
        self._unproven = False

    def back_off(self) -> None:
        """Wait the restart strategy's backoff time before the restore."""
        backoff = self._restart.get_backoff_time_ms()
        if backoff > 0:
            time.sleep(backoff / 1000.0)

    def roll_back(self, exc: BaseException, epoch: int, incarnation: int) -> StartState:
        """Restore every subtask from the latest completed checkpoint (or the start): the
        state the job continues with after ``epoch`` failed with ``exc``."""
        latest = self._checkpoints.latest_for_recovery()
        if latest is not None:
            self._check_master_state(latest.metadata, latest.external_pointer)
        start = self._restore_from(
            latest.metadata if latest is not None else None,
            RestoreReason.FAILOVER,
            latest.external_pointer if latest is not None else "",
        )
        self._recovery.reset(latest, epoch)
        self._changelog.reset()
        self._unproven = latest is not None
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

    def _check_master_state(self, metadata: CheckpointMetadata | None, pointer: str) -> None:
        """Refuse, before any I/O, source splits and sink commits of the snapshot at
        ``pointer`` that the job's own sources and sinks could not have recorded: the
        master state is input from outside (each connector checks its own). The sinks check
        against the restoring job's id, or the id a trusted snapshot states (the run it
        continues), and are told whether the snapshot is trusted."""
        where = f"checkpoint metadata file {metadata_file(pointer)}"
        try:
            master = JobMasterState.from_metadata(metadata)
        except (KeyError, TypeError, ValueError) as e:
            raise UnsafeStatePathError(
                f"Refusing the job master state in {where}: it is malformed ({e!r})."
            ) from None
        if master is None:
            return
        if not isinstance(master.sources, Mapping):
            raise UnsafeStatePathError(
                f"Refusing the job master state in {where}: field sources is not a mapping."
            )
        self._sources.check_restored(master.sources, where)
        for op, committables in master.pending_sink_commits:
            sink = self._sink_commits.sinks.get(op)
            if sink is None:
                continue
            if not isinstance(committables, list):
                committables = [committables]
            trusted = pointer != self._untrusted
            field = f"{where}, field pending_sink_commits[{op!r}]"
            if not trusted:
                field += f" ({untrusted_commits_note()})"
            sink.check_restored(
                committables,
                master.job_id if trusted else self._progress.job_id,
                field,
                trusted=trusted,
            )

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
