"""The driver's side of changelog checkpoints (Flink's changelog state backend, FLIP-158).

With ``state.backend.changelog.enabled``, keyed subtasks store what every epoch changed
(as they do for per-subtask recovery), and a checkpoint no longer needs a snapshot of their
state: its handle is the latest *materialization* (a snapshot taken by an earlier
checkpoint) plus the changelog entries of every epoch since. A checkpoint then writes only
the last epochs' changes, whatever the size of the state or the compactions of RocksDB.
A checkpoint materializes (every keyed subtask snapshots, as without the changelog) when
the periodic materialization interval has passed since the latest completed one, when
there is none yet (job start, failover), when an entry since it is missing, when the
latest checkpoint carried more than ``MAX_INLINE_CHANGELOG_BYTES`` of small (inline)
entries, or when another checkpoint is in flight; savepoints are always snapshots of their
own.

Ownership of the entries: the job's until a completed checkpoint references them, the
shared-state registry's from then on (as it owns the materialization's files, which are
written as shared state). Entries no checkpoint took are deleted here once a newer
materialization covers them, or when the job restarts or ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sparkpoint.checkpoint.handles import ChangelogStateBackendHandle, KeyedStateHandle
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.store import CompletedCheckpoint
from sparkpoint.errors import CheckpointException, CheckpointFailureReason
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import ChangelogAck, SnapshotAck
from sparkpoint.runtime.subtask_recovery import discard_entries
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index

__all__ = ["ChangelogCheckpoints"]

_Key = tuple[str, int]  # (operator id, subtask)
# Small entries are inline in the report and so in every ``_metadata`` that references them
# again: past this many inline bytes in one checkpoint, the next one materializes.
MAX_INLINE_CHANGELOG_BYTES = 4 * 1024 * 1024


class ChangelogCheckpoints:
    """Materializations and changelog entries of one job run (see the module doc)."""

    def __init__(self, plan: Plan, enabled: bool, interval_ms: int, backend: str) -> None:
        self.enabled = enabled
        self.interval_ms = interval_ms
        self.backend = backend  # the keyed backends' name (the entries' format)
        self._ranges = {
            node.operator_id: (st.max_parallelism, st.parallelism)
            for st in plan.stages for node in st.keyed_nodes
        }
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

    # -- deciding --------------------------------------------------------------------------
    def should_materialize(self, now_ms: int, others_in_flight: bool) -> bool:
        """Whether the checkpoint triggered now must snapshot the keyed state."""
        if not self.enabled:
            return True
        return (
            self.materialization_id is None
            or others_in_flight
            or self._missing_epoch > self.materialization_epoch
            or self._inline_bytes > MAX_INLINE_CHANGELOG_BYTES
            or now_ms - self._materialized_ms >= self.interval_ms
        )

    def observe(self, acks: Iterable[ChangelogAck]) -> None:
        """Changelog entries of an accepted run: note epochs whose changes were not stored."""
        for ack in acks:
            if ack.handle is None:
                self._missing_epoch = max(self._missing_epoch, ack.epoch)

    # -- composing -------------------------------------------------------------------------
    def compose(
        self, checkpoint_id: int, epoch: int, acks: list[SnapshotAck],
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
                handle = ChangelogStateBackendHandle(
                    self.backend, self._range(key), checkpoint_id, checkpoint_id,
                    (ack.handle,) if ack.handle is not None else (), (),
                )
            out.append(SnapshotAck(ack.operator_id, ack.subtask, handle, handle.state_size))
        return out

    def _composed(
        self, checkpoint_id: int, epoch: int, key: _Key,
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
            (a for a in (*self._held.get(key, ()), *recent.get(key, ()))
             if self.materialization_epoch < a.epoch <= epoch),
            key=lambda a: a.epoch,
        )
        handles = tuple(a.handle for a in entries)
        new = sum(1 for h in handles if h.physical_id not in self._registered)
        return ChangelogStateBackendHandle(
            self.backend, self._range(key), checkpoint_id, self.materialization_id,
            self._materialized.get(key, ()), handles, new,
        )

    def _range(self, key: _Key) -> KeyGroupRange:
        max_parallelism, parallelism = self._ranges[key[0]]
        return compute_key_group_range_for_operator_index(max_parallelism, parallelism, key[1])

    # -- what happened ---------------------------------------------------------------------
    def completed(
        self, checkpoint: CompletedCheckpoint, epoch: int, covered: list[ChangelogAck],
        now_ms: int,
    ) -> None:
        """``checkpoint`` (as of ``epoch``) completed; ``covered`` are the entries up to
        ``epoch`` that per-subtask recovery no longer needs."""
        materialized: dict[_Key, tuple[KeyedStateHandle, ...]] = {}
        is_materialization = False
        inline = 0
        for op in checkpoint.operator_states:
            for index, sub in op.subtask_states.items():
                for handle in sub.managed_keyed_state:
                    if isinstance(handle, ChangelogStateBackendHandle):
                        self._registered.update(h.physical_id for h in handle.changelog)
                        materialized[(op.operator_id, index)] = handle.materialized
                        is_materialization |= handle.materialized_here
                        inline += sum(len(h.as_bytes_if_in_memory() or b"")
                                      for h in handle.changelog)
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

    def reset(self) -> None:
        """Every subtask restarts from a checkpoint (job start, failover): the next
        checkpoint materializes."""
        self.materialization_id = None
        self.materialization_epoch = 0
        self._materialized = {}
        self._missing_epoch = 0
        self._release(lambda _ack: True)

    def close(self) -> None:
        """The job ended: delete the entries no checkpoint took, and wait for it."""
        self._release(lambda _ack: True)
        self._pool.shutdown(wait=True)

    def _release(self, which: Any) -> None:
        """Forget held entries matching ``which``; delete those no checkpoint references."""
        doomed: list[Any] = []
        for key, acks in list(self._held.items()):
            keep = [a for a in acks if not which(a)]
            doomed.extend(a.handle for a in acks
                          if which(a) and a.handle.physical_id not in self._registered)
            if keep:
                self._held[key] = keep
            else:
                del self._held[key]
        # Every registered entry is held until released: only the held ones' ids matter.
        self._registered &= {a.handle.physical_id for acks in self._held.values() for a in acks}
        if doomed:
            self._pool.submit(discard_entries, doomed)

