"""Whether a keyed subtask may use its local state for an epoch: the decision table.

Every local commit stores a ``LocalCommitMarker`` (as the backend's ``extra`` bytes): the
job, its restore incarnation, the run (Spark job) that committed, and the runtime's timer
index. Opening the state for epoch ``E``, the runtime compares the marker and the local
epoch with what the driver expects:

=====================================================  ==================================
local state                                            action
=====================================================  ==================================
this job and incarnation, epoch E-1, committed by      use it
the run the driver accepted for E-1
this job and incarnation, epoch E (an earlier attempt  undo that commit, decide again
or run of E committed)
anything else, and a restore is given                  restore
anything else, nothing to restore from                 the state is lost
=====================================================  ==================================

Pure: no I/O, no Spark; the runtime applies the action.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

__all__ = ["LocalCommitMarker", "LocalStateAction", "decide_local_state"]


class LocalStateAction(enum.Enum):
    """What the runtime does with a subtask's local state before processing an epoch."""

    USE = "use"
    UNDO_LAST_COMMIT = "undo"
    RESTORE = "restore"
    LOST = "lost"


@dataclass(frozen=True)
class LocalCommitMarker:
    """What the runtime records with each local commit of a keyed subtask.

    ``timers`` is the earliest event-time and processing-time timer (``None``: unknown,
    scan the timer state), so a task need not scan its timers every epoch.
    """

    job_id: str
    incarnation: int
    run: int | None
    timers: tuple[int | None, int | None] = (None, None)

    def to_bytes(self) -> bytes:
        """The marker as stored by ``commit_local(epoch, extra)``."""
        return json.dumps(
            {
                "job": self.job_id,
                "incarnation": self.incarnation,
                "run": self.run,
                "timers": list(self.timers),
            }
        ).encode()

    @staticmethod
    def from_bytes(raw: bytes) -> LocalCommitMarker | None:
        """The marker stored as ``raw``; ``None`` for no marker or one this code did not
        write (an older format or another program)."""
        if not raw:
            return None
        try:
            data = json.loads(raw)
            timers = data.get("timers") or [None, None]
            return LocalCommitMarker(
                str(data["job"]),
                int(data["incarnation"]),
                data.get("run"),
                (timers[0], timers[1]),
            )
        except (ValueError, KeyError, TypeError, IndexError):
            return None


def decide_local_state(
    local_epoch: int | None,
    marker: LocalCommitMarker | None,
    *,
    job_id: str,
    incarnation: int,
    epoch: int,
    prev_run: int | None,
    can_restore: bool,
    may_undo: bool = True,
) -> LocalStateAction:
    """The action for local state at ``local_epoch`` with ``marker`` before ``epoch``
    (see the module table). After ``UNDO_LAST_COMMIT`` call again with ``may_undo=False``
    and the reverted epoch and marker."""
    ours = (
        marker is not None
        and local_epoch is not None
        and marker.job_id == job_id
        and marker.incarnation == incarnation
    )
    if ours and marker is not None:
        if local_epoch == epoch - 1 and marker.run == prev_run:
            return LocalStateAction.USE
        if local_epoch == epoch and may_undo:
            return LocalStateAction.UNDO_LAST_COMMIT
    return LocalStateAction.RESTORE if can_restore else LocalStateAction.LOST
