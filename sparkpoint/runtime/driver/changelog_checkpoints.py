"""The driver's side of changelog checkpoints (Flink's changelog state backend, FLIP-158).

With ``state.backend.changelog.enabled``, keyed subtasks store what every epoch changed
(as they do for per-subtask recovery), and a checkpoint no longer needs a snapshot of their
state: its handle is the latest *materialization* (a snapshot taken by an earlier
checkpoint) plus the changelog entries of every epoch since. A checkpoint then writes only
the last epochs' changes, whatever the size of the state or the compactions of RocksDB.
A checkpoint materializes (every keyed subtask snapshots, as without the changelog) when
there is no materialization yet (job start, failover), when an entry since it is missing,
when the latest checkpoint carried more than ``MAX_INLINE_CHANGELOG_BYTES`` of small
(inline) entries, or when another checkpoint is in flight; savepoints are always snapshots
of their own. When the periodic materialization interval has passed since the latest
materialization, the subtasks snapshot their state at the end of the next checkpoint's
epoch and upload it in the background, at most ``materialization_rate`` bytes per second
each (Flink's periodic materialization): that checkpoint and the ones after it go on
referencing the previous materialization until every subtask's upload has ended; then the
driver adopts the new one. Without background uploads (synchronous snapshots), the
checkpoint materializes itself. A failed background materialization is retried an
interval later; ``failures_allowed`` of them in a row fail the job over.

Ownership of the entries: the job's until a completed checkpoint references them, the
shared-state registry's from then on (as it owns the materialization's files, which are
written as shared state). Entries no checkpoint took are deleted here once a newer
materialization covers them, or when the job restarts or ends. A background
materialization's files are the job's until a completed checkpoint references them: one
abandoned (an upload failed or was lost, a failover, the end of the job) is deleted.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from sparkpoint.checkpoint.handles import (
    ChangelogStateBackendHandle,
    KeyedStateHandle,
    discard_quietly,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.stats import written_bytes
from sparkpoint.checkpoint.store import CompletedCheckpoint
from sparkpoint.config import StateBackendOptions
from sparkpoint.errors import CheckpointException, CheckpointFailureReason, SparkpointError
from sparkpoint.runtime.driver.subtask_recovery import discard_entries
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import ChangelogAck, SnapshotAck, UploadState, UploadStatus
from sparkpoint.runtime.task.async_upload import uploaded_files
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index

__all__ = [
    "BackgroundMaterialization",
    "ChangelogCheckpoints",
    "MaterializationFailuresExceeded",
    "MaterializationStats",
]

_Key = tuple[str, int]  # (operator id, subtask)
# Small entries are inline in the report and so in every ``_metadata`` that references them
# again: past this many inline bytes in one checkpoint, the next one materializes.
MAX_INLINE_CHANGELOG_BYTES = 4 * 1024 * 1024
_KEPT_ABORTED = 16  # abandoned materializations the tasks are told about
_LOG = logging.getLogger(__name__)


class MaterializationFailuresExceeded(SparkpointError):
    """More periodic materializations failed in a row than allowed: the job fails over."""


@dataclass(frozen=True)
class MaterializationStats:
    """A background materialization the job adopted: what it uploaded, how long it took."""

    materialization_id: int
    epoch: int  # the epoch whose state it holds
    uploaded_bytes: int  # files reused from the previous one count zero
    seconds: float  # from the request that started it to its adoption


@dataclass
class BackgroundMaterialization:
    """A periodic materialization uploading in the background (its id is the id of the
    checkpoint whose epoch it snapshots)."""

    materialization_id: int
    epoch: int | None = None  # None until the run that started it is accepted
    started: float = field(default_factory=time.perf_counter)
    awaiting: set[_Key] = field(default_factory=set)
    handles: dict[_Key, tuple[KeyedStateHandle, ...]] = field(default_factory=dict)
    uploaded_bytes: int = 0


class ChangelogCheckpoints:
    """Materializations and changelog entries of one job run (see the module doc)."""

    def __init__(
        self,
        plan: Plan,
        enabled: bool,
        interval_ms: int | None,
        backend: str,
        failures_allowed: int = 3,
    ) -> None:
        self.enabled = enabled
        self.interval_ms = interval_ms  # None: no periodic materialization
        self.backend = backend  # the keyed backends' name (the entries' format)
        self.failures_allowed = failures_allowed
        self._failures = 0  # periodic materializations failed in a row
        self._ranges = {
            node.operator_id: (st.max_parallelism, st.parallelism)
            for st in plan.stages
            for node in st.keyed_nodes
        }
        self._keyed = {(op, i) for op, (_mp, p) in self._ranges.items() for i in range(p)}
        self.materialization_id: int | None = None
        self.materialization_epoch = 0
        self._materialized_ms = 0
        self._materialized: dict[_Key, tuple[KeyedStateHandle, ...]] = {}
        # entries covered by a completed checkpoint but newer than the materialization
        self._held: dict[_Key, list[ChangelogAck]] = {}
        self._registered: set[str] = set()  # entries some completed checkpoint references
        self._missing_epoch = 0  # latest epoch whose changes some subtask failed to store
        self._inline_bytes = 0  # inline entry bytes of the latest completed checkpoint
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparkpoint-changelog")
        self._background: BackgroundMaterialization | None = None
        # adopted from the background and no completed checkpoint references it yet
        self._unreferenced: BackgroundMaterialization | None = None
        self.aborted: deque[int] = deque(maxlen=_KEPT_ABORTED)
        # the materialization the latest completed checkpoint references
        self.notify_id: int | None = None
        self.adopted: list[MaterializationStats] = []

    # -- deciding --------------------------------------------------------------------------
    def should_materialize(
        self, now_ms: int, others_in_flight: bool, background: bool = False
    ) -> bool:
        """Whether the checkpoint triggered now must snapshot the keyed state (with
        ``background``, a periodic materialization can upload in the background)."""
        if not self.enabled:
            return True
        return (
            self.materialization_id is None
            or others_in_flight
            or self._missing_epoch > self.materialization_epoch
            or self._inline_bytes > MAX_INLINE_CHANGELOG_BYTES
            or (not background and self._interval_passed(now_ms))
        )

    def _interval_passed(self, now_ms: int) -> bool:
        return self.interval_ms is not None and now_ms - self._materialized_ms >= self.interval_ms

    def start_background(self, checkpoint_id: int, now_ms: int) -> bool:
        """Whether checkpoint ``checkpoint_id`` (which does not materialize) starts a
        background materialization: the interval has passed and none is uploading."""
        current = self._background
        if current is not None and current.epoch is None:
            self._abandon(current, "its run was not accepted")
        if not self.enabled or self._background is not None or not self._interval_passed(now_ms):
            return False
        self._background = BackgroundMaterialization(checkpoint_id)
        return True

    def pending_materializations(self) -> frozenset[int]:
        """The background materialization the tasks report on (if any)."""
        current = self._background
        return frozenset() if current is None else frozenset({current.materialization_id})

    def run_accepted(self, epoch: int, started: Iterable[_Key], checkpoint_id: int | None) -> None:
        """The run of ``epoch`` was accepted; ``started``: the subtasks that acknowledged
        checkpoint ``checkpoint_id`` with their changelog (and so started uploading when it
        materializes in the background)."""
        current = self._background
        if current is None or current.epoch is not None:
            return
        if current.materialization_id != checkpoint_id:
            self._abandon(current, "its run was not accepted")
            return
        awaiting = set(started)
        if awaiting != self._keyed:  # e.g. the epoch ending the input keeps no changelog
            self._abandon(
                current, f"only {len(awaiting)} of {len(self._keyed)} subtasks started it"
            )
            return
        current.epoch = epoch
        current.awaiting = awaiting

    def advance(self, statuses: Iterable[UploadStatus], now_ms: int) -> None:
        """Take the background materialization's upload statuses of an accepted run: adopt
        it once every upload has ended, abandon it when one failed or was lost (the next
        attempt comes an interval later); ``MaterializationFailuresExceeded`` when that
        makes more failures in a row than allowed."""
        current = self._background
        if current is None or current.epoch is None:
            return
        found = {
            (s.operator_id, s.subtask): s
            for s in statuses
            if s.checkpoint_id == current.materialization_id
        }
        for key in sorted(current.awaiting):
            status = found.get(key)
            if status is None or status.state in (UploadState.FAILED, UploadState.LOST):
                detail = "no record of it" if status is None else status.detail
                why = f"the upload of {key[0]}#{key[1]} ended: {detail}"
                self._abandon(current, why)
                self._materialized_ms = now_ms
                self._failures += 1
                if self._failures >= self.failures_allowed:
                    raise MaterializationFailuresExceeded(
                        f"periodic materializations failed in a row: {self._failures} "
                        f"({StateBackendOptions.MATERIALIZATION_MAX_FAILURES_ALLOWED.key} = "
                        f"{self.failures_allowed}); materialization "
                        f"{current.materialization_id}: {why}"
                    )
                return
            if status.state == UploadState.DONE:
                handle = status.handle
                current.handles[key] = (handle,) if handle is not None else ()
                current.uploaded_bytes += written_bytes(handle)
                current.awaiting.discard(key)
        if current.awaiting:
            return
        self._background = None
        if current.epoch <= self.materialization_epoch:  # a checkpoint materialized since
            self._abandon(current, "a newer materialization completed")
            return
        seconds = time.perf_counter() - current.started
        self._failures = 0
        self.materialization_id = current.materialization_id
        self.materialization_epoch = current.epoch
        self._materialized_ms = now_ms
        self._materialized = dict(current.handles)
        if self._unreferenced is not None:  # adopted before, never referenced, superseded
            self._discard_files(self._unreferenced)
        self._unreferenced = current
        self.adopted.append(
            MaterializationStats(
                current.materialization_id, current.epoch, current.uploaded_bytes, seconds
            )
        )
        _LOG.info(
            "Materialization %d (epoch %d) adopted: %d bytes uploaded in %.1f s",
            current.materialization_id,
            current.epoch,
            current.uploaded_bytes,
            seconds,
        )
        self._release(lambda ack: ack.epoch <= current.epoch)

    def _abandon(self, materialization: BackgroundMaterialization, why: str) -> None:
        """Stop waiting for ``materialization``: its uploads stop, its files go."""
        _LOG.warning("Materialization %d abandoned: %s", materialization.materialization_id, why)
        if self._background is materialization:
            self._background = None
        self.aborted.append(materialization.materialization_id)
        self._discard_files(materialization)

    def _discard_files(self, materialization: BackgroundMaterialization) -> None:
        files = [
            f for hs in materialization.handles.values() for h in hs for f in uploaded_files(h)
        ]
        if files:
            self._pool.submit(discard_quietly, files)

    def observe(self, acks: Iterable[ChangelogAck]) -> None:
        """Changelog entries of an accepted run: note epochs whose changes were not stored."""
        for ack in acks:
            if ack.handle is None:
                self._missing_epoch = max(self._missing_epoch, ack.epoch)

    # -- composing -------------------------------------------------------------------------
    def compose(
        self,
        checkpoint_id: int,
        epoch: int,
        acks: list[SnapshotAck],
        recent: dict[_Key, list[ChangelogAck]],
    ) -> list[SnapshotAck]:
        """``acks`` with every keyed handle made a changelog handle: a subtask's snapshot
        becomes a new materialization, a changelog acknowledgement the latest
        materialization plus the entries after it up to ``epoch`` (``recent``: entries not
        yet covered by a completed checkpoint). ``CheckpointException`` when some entry is
        missing."""
        out: list[SnapshotAck] = []
        for ack in acks:
            if ack.operator_state:
                out.append(ack)
                continue
            key = (ack.operator_id, ack.subtask)
            if ack.changelog:
                handle = self._composed(checkpoint_id, epoch, key, recent)
            else:
                keyed = cast("KeyedStateHandle | None", ack.handle)  # not operator_state
                handle = ChangelogStateBackendHandle(
                    self.backend,
                    self._range(key),
                    checkpoint_id,
                    checkpoint_id,
                    (keyed,) if keyed is not None else (),
                    (),
                )
            out.append(SnapshotAck(ack.operator_id, ack.subtask, handle, handle.state_size))
        return out

    def _composed(
        self,
        checkpoint_id: int,
        epoch: int,
        key: _Key,
        recent: dict[_Key, list[ChangelogAck]],
    ) -> ChangelogStateBackendHandle:
        if self.materialization_id is None or self._missing_epoch > self.materialization_epoch:
            raise CheckpointException(
                CheckpointFailureReason.CHECKPOINT_DECLINED,
                f"{key[0]}#{key[1]}: no complete changelog since a materialization (latest "
                f"materialization {self.materialization_id}, changes of epoch "
                f"{self._missing_epoch} not stored)",
                checkpoint_id,
            )
        entries = sorted(
            (
                a
                for a in (*self._held.get(key, ()), *recent.get(key, ()))
                if self.materialization_epoch < a.epoch <= epoch
            ),
            key=lambda a: a.epoch,
        )
        handles = tuple(a.handle for a in entries)
        new = sum(1 for h in handles if h.physical_id not in self._registered)
        return ChangelogStateBackendHandle(
            self.backend,
            self._range(key),
            checkpoint_id,
            self.materialization_id,
            self._materialized.get(key, ()),
            handles,
            new,
        )

    def _range(self, key: _Key) -> KeyGroupRange:
        max_parallelism, parallelism = self._ranges[key[0]]
        return compute_key_group_range_for_operator_index(max_parallelism, parallelism, key[1])

    # -- what happened ---------------------------------------------------------------------
    def completed(
        self,
        checkpoint: CompletedCheckpoint,
        epoch: int,
        covered: list[ChangelogAck],
        now_ms: int,
    ) -> None:
        """``checkpoint`` (as of ``epoch``) completed; ``covered`` are the entries up to
        ``epoch`` that per-subtask recovery no longer needs."""
        materialized: dict[_Key, tuple[KeyedStateHandle, ...]] = {}
        is_materialization = False
        inline = 0
        referenced: set[int] = set()
        for op in checkpoint.operator_states:
            for index, sub in op.subtask_states.items():
                for handle in sub.managed_keyed_state:
                    if isinstance(handle, ChangelogStateBackendHandle):
                        self._registered.update(h.physical_id for h in handle.changelog)
                        materialized[(op.operator_id, index)] = handle.materialized
                        is_materialization |= handle.materialized_here
                        referenced.add(handle.materialization_id)
                        inline += sum(
                            len(h.as_bytes_if_in_memory() or b"") for h in handle.changelog
                        )
        if materialized:
            self._inline_bytes = inline
        for ack in covered:
            self._held.setdefault((ack.operator_id, ack.subtask), []).append(ack)
        if is_materialization:
            self.materialization_id = checkpoint.checkpoint_id
            self.materialization_epoch = epoch
            self._materialized_ms = now_ms
            self._materialized = materialized
            self._release(lambda ack: ack.epoch <= epoch)
            if self._unreferenced is not None:  # older than this one: never referenced
                self._discard_files(self._unreferenced)
                self._unreferenced = None
        if self.materialization_id in referenced:
            self.notify_id = self.materialization_id
            self._materialized = materialized  # as registered (placeholders resolved)
            if (
                self._unreferenced is not None
                and self._unreferenced.materialization_id in referenced
            ):
                self._unreferenced = None  # the shared-state registry owns its files now

    def reset(self) -> None:
        """Every subtask restarts from a checkpoint (job start, failover): the next
        checkpoint materializes."""
        self._drop_background("the job restarts from a checkpoint")
        self.materialization_id = None
        self.materialization_epoch = 0
        self._materialized = {}
        self._missing_epoch = 0
        self._failures = 0
        self.notify_id = None
        self._release(lambda _ack: True)

    def _drop_background(self, why: str) -> None:
        """Abandon the materialization uploading, and delete an adopted one no completed
        checkpoint references."""
        if self._background is not None:
            self._abandon(self._background, why)
        if self._unreferenced is not None:
            self._discard_files(self._unreferenced)
            self._unreferenced = None

    def close(self) -> None:
        """The job ended: delete the entries and materializations no checkpoint took, and
        wait for it."""
        self._drop_background("the job ended")
        self._release(lambda _ack: True)
        self._pool.shutdown(wait=True)

    def _release(self, which: Any) -> None:
        """Forget held entries matching ``which``; delete those no checkpoint references."""
        doomed: list[Any] = []
        for key, acks in list(self._held.items()):
            keep = [a for a in acks if not which(a)]
            doomed.extend(
                a.handle
                for a in acks
                if which(a)
                and a.handle is not None
                and a.handle.physical_id not in self._registered
            )
            if keep:
                self._held[key] = keep
            else:
                del self._held[key]
        # Every registered entry is held until released: only the held ones' ids matter.
        self._registered &= {
            a.handle.physical_id
            for acks in self._held.values()
            for a in acks
            if a.handle is not None
        }
        if doomed:
            self._pool.submit(discard_entries, doomed)
