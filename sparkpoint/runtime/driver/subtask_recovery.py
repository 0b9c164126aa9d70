"""The driver's side of per-subtask recovery.

It keeps the recovery base, the latest completed checkpoint (or savepoint) and the epoch it
covers, and every later changelog entry of every keyed subtask, in epoch order. A subtask
that lost its local state restores the base's handles cut to its key groups and applies
its own entries; nothing else in the job moves. Entries covered by a new base are deleted
(with changelog checkpoints, handed over to them instead). If some epoch's changes are
missing (an entry could not be stored, or a checkpoint that was to cover an epoch failed),
subtasks cannot restore alone until the next checkpoint: the job fails over instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sparkpoint.checkpoint.store import CompletedCheckpoint
from sparkpoint.runtime.driver.state_assignment import assign_keyed_state
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import ChangelogAck, RestoreReason, SubtaskRestore

__all__ = ["SubtaskRecovery", "discard_entries"]

_LOG = logging.getLogger("sparkpoint.job")


class SubtaskRecovery:
    """Recovery base and changelog entries of one job run (see the module doc)."""

    def __init__(
        self,
        plan: Plan,
        explicit_max_parallelism: bool,
        enabled: bool,
        hand_over: bool = False,
    ) -> None:
        self.plan = plan
        self.explicit_max_parallelism = explicit_max_parallelism
        self.enabled = enabled
        # Changelog checkpoints: entries a new base covers go to them instead of deletion.
        self.hand_over = hand_over
        self.base: CompletedCheckpoint | None = None
        self.base_epoch = 0
        self.gap = False
        self.entries: dict[tuple[str, int], list[ChangelogAck]] = {}
        self._base_handles: dict[str, dict[int, list[Any]]] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparkpoint-changelog")

    # -- what happened -------------------------------------------------------------------
    def reset(self, base: CompletedCheckpoint | None, epoch: int) -> None:
        """Every subtask restarts from ``base`` as of ``epoch`` (job start, failover)."""
        self._drop(lambda _ack: True)
        self.base, self.base_epoch, self.gap = base, epoch, False
        self._base_handles = None

    def accept(self, acks: Iterable[ChangelogAck]) -> None:
        """Changelog entries of an accepted run."""
        for ack in acks:
            if ack.handle is None:
                self.gap = True
            else:
                self.entries.setdefault((ack.operator_id, ack.subtask), []).append(ack)

    def discard(self, acks: Iterable[ChangelogAck]) -> None:
        """Entries of a run whose results are not used: delete them."""
        self._delete([a for a in acks if a.handle is not None])

    def checkpoint_completed(
        self, checkpoint: CompletedCheckpoint, epoch: int
    ) -> list[ChangelogAck]:
        """``checkpoint`` covers every epoch up to ``epoch``: it is the new base. Returns the
        entries it covers when they are handed over (else they are deleted)."""
        covered = self._drop(lambda ack: ack.epoch <= epoch, delete=not self.hand_over)
        self.base, self.base_epoch, self.gap = checkpoint, epoch, False
        self._base_handles = None
        return [] if not self.hand_over else covered

    def checkpoint_failed(self) -> None:
        """The checkpoint that was to cover an epoch without changelog entries failed."""
        if self.enabled and not self.gap:
            _LOG.info("Subtasks cannot restore alone until the next checkpoint completes")
        self.gap = True

    # -- restoring -----------------------------------------------------------------------
    def can_restore(self) -> bool:
        """Whether a subtask can restore alone now."""
        return self.enabled and not self.gap

    def restore_for(self, operator_id: str, subtask: int) -> SubtaskRestore:
        """What ``subtask`` of ``operator_id`` restores: the base and its own entries."""
        if self._base_handles is None:
            metadata = self.base.metadata if self.base is not None else None
            self._base_handles = assign_keyed_state(
                self.plan, metadata, self.explicit_max_parallelism
            )
        handles = self._base_handles.get(operator_id, {}).get(subtask, [])
        entries = sorted(self.entries.get((operator_id, subtask), []), key=lambda a: a.epoch)
        return SubtaskRestore(
            tuple(handles),
            tuple(a.handle for a in entries if a.handle is not None),  # held entries have one
            RestoreReason.SUBTASK,
        )

    def close(self) -> None:
        """Delete every entry (the job ended) and wait for the deletions."""
        self._drop(lambda _ack: True)
        self._pool.shutdown(wait=True)

    # -- deleting ------------------------------------------------------------------------
    def _drop(self, which: Any, delete: bool = True) -> list[ChangelogAck]:
        doomed: list[ChangelogAck] = []
        for key, acks in list(self.entries.items()):
            keep = [a for a in acks if not which(a)]
            doomed.extend(a for a in acks if which(a))
            if keep:
                self.entries[key] = keep
            else:
                del self.entries[key]
        if delete:
            self._delete(doomed)
        return doomed

    def _delete(self, acks: list[ChangelogAck]) -> None:
        handles = [a.handle for a in acks]
        if handles:
            self._pool.submit(discard_entries, handles)


def discard_entries(handles: list[Any]) -> None:
    """Delete changelog entries, logging (not raising) what cannot be deleted."""
    for handle in handles:
        try:
            handle.discard()
        except Exception:  # a leftover file is harmless; never fail the job for it
            _LOG.debug("Could not delete changelog entry %s", handle, exc_info=True)
