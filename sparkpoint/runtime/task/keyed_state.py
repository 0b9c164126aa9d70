"""The keyed state of one subtask for one epoch: open (per the local-state decision table),
restore when told, commit locally, snapshot, close."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sparkpoint.checkpoint.audit import state_files
from sparkpoint.checkpoint.streams import RateLimitedStreamFactory, SharedScopeStreamFactory
from sparkpoint.clock import Clock
from sparkpoint.errors import SubtaskRestoreError
from sparkpoint.runtime.graph import Stage
from sparkpoint.runtime.operators.context import TIMERS_STATE
from sparkpoint.runtime.protocol import (
    ChangelogAck,
    EpochSpec,
    SnapshotAck,
    StateLost,
    SubtaskRestore,
    SubtaskRestored,
    UploadStatus,
)
from sparkpoint.runtime.task.async_upload import SubtaskUploads, worker_is_reused
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.changelog_restore import restore_keyed_state
from sparkpoint.state.key_groups import (
    UNTYPED_KEYS,
    KeyGroupAssigner,
    compute_key_group_range_for_operator_index,
    key_group_assigner_of,
)
from sparkpoint.state.local_recovery import (
    LocalCommitMarker,
    LocalStateAction,
    decide_local_state,
)

__all__ = ["NO_TIMER", "SubtaskState"]

NO_TIMER = 2**63  # timer index value: no timer registered (above the maximum watermark)
_LOG = logging.getLogger("sparkpoint.task")
_TIMER_STATES = frozenset({TIMERS_STATE})


class SubtaskState:
    """The keyed backends of one subtask's keyed operators, opened for one epoch."""

    def __init__(
        self,
        spec: EpochSpec,
        stage: Stage,
        subtask: int,
        local_dir: Callable[[str], str],
        clock: Clock,
    ) -> None:
        self.spec = spec
        self.stage = stage
        self.subtask = subtask
        self.local_dir = local_dir
        self.clock = clock
        # operator id -> the subtask's asynchronous upload records on this executor (beside
        # its local state, which a restore deletes)
        self.uploads = {
            node.operator_id: SubtaskUploads(
                local_dir(node.operator_id) + ".uploads", node.operator_id, subtask
            )
            for node in stage.keyed_nodes
        }
        # operator id -> the subtask's background materializations (changelog checkpoints)
        self.materializations = {
            node.operator_id: SubtaskUploads(
                local_dir(node.operator_id) + ".materializations", node.operator_id, subtask
            )
            for node in stage.keyed_nodes
        }
        self.backends: dict[str, Any] = {}
        # operator id -> [earliest event-time timer, earliest processing-time timer]; None
        # means unknown (scan the timers state once), NO_TIMER means there is none.
        self.timer_index: dict[str, list[int | None]] = {}
        self.restored: list[SubtaskRestored] = []
        self.lost: list[StateLost] = []
        cp = spec.checkpoint
        self._async = cp is not None and cp.asynchronous and worker_is_reused()
        # Record each commit's changes when the job keeps a changelog and no snapshot
        # completed with this epoch will cover them (an asynchronous one completes later;
        # with changelog checkpoints, later checkpoints may build on an earlier snapshot).
        # The epoch that ends the input needs none: the job ends with it, so no later epoch
        # can restore a subtask to its end.
        self._changelog = (
            spec.job.changelog_storage is not None
            and not spec.end_of_input
            and (cp is None or cp.asynchronous or spec.job.changelog_checkpoints)
        )
        self._tracked: set[str] = set()

    # -- opening -------------------------------------------------------------------------
    def open_all(self) -> bool:
        """Open every keyed operator's state; False if some state is lost (then nothing is
        open and the task must not process the epoch)."""
        for node in self.stage.keyed_nodes:
            self._open(node.operator_id)
        if self.lost:
            self.close()
            return False
        return True

    def backend(self, operator_id: str) -> Any:
        """The open backend of ``operator_id``."""
        return self.backends[operator_id]

    def _params(self, operator_id: str) -> KeyedStateBackendParameters:
        stage = self.stage
        return KeyedStateBackendParameters(
            job_id=self.spec.job.job_id,
            operator_id=operator_id,
            subtask_index=self.subtask,
            parallelism=stage.parallelism,
            max_parallelism=stage.max_parallelism,
            key_group_range=compute_key_group_range_for_operator_index(
                stage.max_parallelism, stage.parallelism, self.subtask
            ),
            local_dir=self.local_dir(operator_id),
            clock=self.clock,
            timer_states=_TIMER_STATES,
            key_group_assigner=self._key_group_assigner(operator_id),
        )

    def _key_group_assigner(self, operator_id: str) -> KeyGroupAssigner:
        """How the keys of ``operator_id`` map to key groups: as its keyed input's selector
        says (the declared key type), the same rule the router partitions by."""
        for node in self.stage.keyed_nodes:
            if node.operator_id == operator_id and node.inputs:
                return key_group_assigner_of(node.inputs[0].key_selector)
        return UNTYPED_KEYS

    def _open(self, operator_id: str) -> None:
        spec = self.spec
        params = self._params(operator_id)
        factory = spec.job.state_backend
        backend = factory.create_keyed_state_backend(params)
        restore = spec.restore.get(operator_id, {}).get(self.subtask)
        may_undo = True
        while True:
            local_epoch = backend.local_epoch()
            marker = LocalCommitMarker.from_bytes(backend.local_extra())
            action = decide_local_state(
                local_epoch,
                marker,
                job_id=spec.job.job_id,
                incarnation=spec.incarnation,
                epoch=spec.epoch,
                prev_run=spec.prev_run,
                can_restore=restore is not None,
                may_undo=may_undo,
            )
            if action is LocalStateAction.UNDO_LAST_COMMIT:
                may_undo = False
                if backend.revert_to(spec.epoch - 1):
                    continue
                action = LocalStateAction.RESTORE if restore is not None else LocalStateAction.LOST
            break
        if action is LocalStateAction.USE and marker is not None:
            self.timer_index[operator_id] = list(marker.timers)
        elif action is LocalStateAction.LOST:
            backend.close()
            self.lost.append(
                StateLost(
                    operator_id,
                    self.subtask,
                    f"{'no' if local_epoch is None else 'stale'} local state for epoch "
                    f"{spec.epoch} (local epoch {local_epoch}, marker {marker}) "
                    f"in {params.local_dir}",
                )
            )
            return
        elif action is LocalStateAction.RESTORE and restore is not None:
            t0 = time.perf_counter()
            backend.dispose()
            backend = factory.create_keyed_state_backend(params)
            try:
                replayed = restore_keyed_state(backend, params, restore.handles)
                if restore.changelog:
                    backend.apply_changes([h.read_all() for h in restore.changelog])
            except Exception as e:
                backend.dispose()
                raise SubtaskRestoreError(self._restore_failure(operator_id, restore, e)) from e
            # Restored timers are unknown to the index: the first firing scans them.
            self.timer_index[operator_id] = (
                [None, None] if restore.handles or restore.changelog else [NO_TIMER, NO_TIMER]
            )
            backend.commit_local(spec.epoch - 1, self._marker(operator_id, spec.prev_run))
            self.restored.append(
                SubtaskRestored(
                    operator_id,
                    self.subtask,
                    restore.reason,
                    replayed + len(restore.changelog),
                    time.perf_counter() - t0,
                )
            )
        # With changelog checkpoints, a backend's snapshots are materializations: the one
        # the latest completed checkpoint references is the confirmed one (a backend that
        # keeps no changelog materializes in every checkpoint, so that is the checkpoint).
        notify = (
            spec.notify_materialized if spec.job.changelog_checkpoints else spec.notify_complete
        )
        if notify is not None:
            backend.notify_checkpoint_complete(notify)
        if self._changelog and backend.track_changes():
            self._tracked.add(operator_id)
        self.backends[operator_id] = backend

    def _restore_failure(self, operator_id: str, restore: SubtaskRestore, error: Exception) -> str:
        """What failed, for the driver's log: the error, the operator (uid and name), the
        subtask and the state files it was restoring from."""
        node = next((n for n in self.stage.keyed_nodes if n.operator_id == operator_id), None)
        who = f"operator {operator_id}"
        if node is not None:
            uid = f"uid {node.uid!r}, " if node.uid else ""
            who = f"operator {node.name!r} ({uid}id {operator_id})"
        files = sorted(
            {path for h in (*restore.handles, *restore.changelog) for path in state_files(h)}
        )
        where = (
            f"state files {', '.join(files)}"
            if files
            else "state held inline in the snapshot's _metadata"
        )
        return (
            f"{error} (subtask {self.subtask} of {who}, restoring from {where}; "
            f"{type(error).__name__})"
        )

    def _marker(self, operator_id: str, run: int | None) -> bytes:
        spec = self.spec
        timers = self.timer_index.get(operator_id, [None, None])
        return LocalCommitMarker(
            spec.job.job_id, spec.incarnation, run, (timers[0], timers[1])
        ).to_bytes()

    # -- end of the epoch ----------------------------------------------------------------
    def commit_and_snapshot(self) -> tuple[list[SnapshotAck], list[ChangelogAck]]:
        """Commit every backend locally for this epoch, then snapshot it when the epoch
        carries a checkpoint (uploading in the task, or starting a background upload), and
        store its changes when the job keeps a changelog; closes the backends."""
        spec = self.spec
        acks: list[SnapshotAck] = []
        changes: list[ChangelogAck] = []
        factory = None
        faults = spec.job.faults
        uploading: list[threading.Thread] = []
        try:
            for operator_id, backend in self.backends.items():
                backend.commit_local(spec.epoch, self._marker(operator_id, spec.run))
                if faults is not None:
                    faults.after_local_commit(operator_id, self.subtask, spec.epoch)
                if operator_id in self._tracked:
                    entry = backend.take_changes()
                    if entry is not None:
                        changes.append(self._store_changes(operator_id, entry))
                cp = spec.checkpoint
                if cp is None:
                    continue
                if not cp.materialize and operator_id in self._tracked:
                    acks.append(SnapshotAck(operator_id, self.subtask, None, 0, changelog=True))
                    if not cp.materialize_in_background:
                        continue
                if factory is None:
                    access = cp.storage.create_checkpoint_storage(spec.job.job_id)
                    factory = access.resolve_checkpoint_storage_location(
                        cp.checkpoint_id, cp.location_reference
                    )
                    savepoint = cp.snapshot_type == SnapshotType.SAVEPOINT
                    if spec.job.changelog_checkpoints and not savepoint:
                        factory = SharedScopeStreamFactory(factory)
                if not cp.materialize and operator_id in self._tracked:
                    self._start_materialization(operator_id, backend, factory)
                    continue
                if self._async:
                    uploading.append(self._start_upload(operator_id, backend, factory))
                    continue
                upload = backend.snapshot(cp.checkpoint_id, factory, cp.snapshot_type)
                handle = upload()
                size = handle.state_size if handle is not None else 0
                acks.append(SnapshotAck(operator_id, self.subtask, handle, size))
        finally:
            self.close()
        if uploading and spec.checkpoint is not None:
            _await(uploading, spec.checkpoint.upload_wait_ms / 1000)
        return acks, changes

    def _start_upload(
        self,
        operator_id: str,
        backend: Any,
        factory: Any,
        uploads: SubtaskUploads | None = None,
        rate: int | None = None,
    ) -> threading.Thread:
        """Take the snapshot's synchronous part now and upload it in the background (a
        checkpoint's, or with ``uploads`` a materialization's, at most ``rate`` bytes per
        second)."""
        cp = self.spec.checkpoint
        assert cp is not None
        uploads = uploads or self.uploads[operator_id]
        wrapped = uploads.stream_factory(cp.checkpoint_id, factory)
        if rate is not None:  # outside the cancellable streams: each paced piece checks
            wrapped = RateLimitedStreamFactory(wrapped, rate)
        upload = backend.snapshot(cp.checkpoint_id, wrapped, cp.snapshot_type)
        faults = self.spec.job.faults
        before = None
        if faults is not None:

            def before() -> None:
                faults.before_upload(operator_id, self.subtask, cp.checkpoint_id)

        return uploads.start(cp.checkpoint_id, upload, before)

    def _start_materialization(self, operator_id: str, backend: Any, factory: Any) -> None:
        """Snapshot the committed state now and upload it in the background (at most
        ``JobSpec.materialization_rate`` bytes per second) as materialization
        ``checkpoint_id``."""
        thread = self._start_upload(
            operator_id,
            backend,
            factory,
            self.materializations[operator_id],
            self.spec.job.materialization_rate,
        )
        if not self._async:  # the worker ends with the task: upload within it
            thread.join()

    def settle_uploads(self) -> None:
        """Forget (and cancel) uploads of checkpoints and materializations the driver no
        longer waits for."""
        spec = self.spec
        for uploads in self.uploads.values():
            uploads.settle(spec.pending_checkpoints, spec.aborted_checkpoints)
        if spec.job.changelog_checkpoints:  # no materialization records otherwise
            for uploads in self.materializations.values():
                uploads.settle(spec.pending_materializations, spec.aborted_materializations)

    def upload_statuses(self) -> list[UploadStatus]:
        """Where every upload of a checkpoint the driver waits for stands."""
        pending = self.spec.pending_checkpoints
        if not pending:
            return []
        return [s for u in self.uploads.values() for s in u.statuses(pending)]

    def materialization_statuses(self) -> list[UploadStatus]:
        """Where every background materialization the driver waits for stands."""
        pending = self.spec.pending_materializations
        if not pending:
            return []
        return [s for u in self.materializations.values() for s in u.statuses(pending)]

    def _store_changes(self, operator_id: str, entry: bytes) -> ChangelogAck:
        """Write a changelog entry as task-owned state (inline when small); a failure is
        reported as an entry without a handle (the driver then cannot restore subtasks
        alone until the next checkpoint)."""
        spec = self.spec
        storage = spec.job.changelog_storage
        assert storage is not None  # only tracked operators store changes (``_changelog``)
        try:
            access = storage.create_checkpoint_storage(spec.job.job_id)
            with access.create_task_owned_state_stream() as out:
                out.write(entry)
                handle = out.close_and_get_handle()
        except Exception as exc:  # any storage failure: no changelog entry
            _LOG.warning(
                "Changelog entry of %s#%d for epoch %d not stored: %r",
                operator_id,
                self.subtask,
                spec.epoch,
                exc,
            )
            handle = None
        return ChangelogAck(operator_id, self.subtask, spec.epoch, handle, len(entry))

    def close(self) -> None:
        """Close every open backend (local state stays on disk)."""
        for backend in self.backends.values():
            backend.close()
        self.backends = {}


def _await(threads: list[threading.Thread], seconds: float) -> None:
    """Wait up to ``seconds`` in all for ``threads`` to end: an upload that ends in time is
    reported by this task (its checkpoint completes with this epoch)."""
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
