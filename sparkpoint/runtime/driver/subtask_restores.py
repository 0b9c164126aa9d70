"""Which keyed subtasks restore alone in the next run: those moved off a lost executor and
those that found their local state lost (when per-subtask recovery can restore them)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.start_state import StartState
from sparkpoint.runtime.driver.subtask_recovery import SubtaskRecovery
from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import RestoreReason, StateLost
from sparkpoint.runtime.spark.placement import Move

__all__ = ["SubtaskRestores"]

_LOG = logging.getLogger("sparkpoint.job")


class SubtaskRestores:
    """Plans the restores of single keyed subtasks into the job's ``StartState``."""

    def __init__(
        self, job_id: str, plan: Plan, recovery: SubtaskRecovery, progress: JobProgress
    ) -> None:
        self._job_id = job_id
        self._plan = plan
        self._recovery = recovery
        self._progress = progress

    def after_moves(self, moves: Sequence[Move], start: StartState) -> None:
        """Subtasks placed on a new executor because theirs is gone restore there (a
        whole-job restore already planned covers them)."""
        for move in moves:
            if move.old_executor is None:
                continue
            _LOG.info(
                "Job %s: keyed subtask %d of stage %d moves from lost executor %s to %s",
                self._job_id,
                move.subtask,
                move.stage,
                move.old_executor,
                move.new_executor,
            )
            if not self._recovery.can_restore():
                continue  # the subtask will find no state there; the job then fails over
            for node in self._plan.stages[move.stage].keyed_nodes:
                planned = start.planned_restore(node.operator_id, move.subtask)
                if planned is None or planned.reason == RestoreReason.SUBTASK:
                    self._plan_restore(
                        start, node.operator_id, move.subtask, f"executor {move.old_executor} lost"
                    )

    def after_lost(self, lost: Sequence[StateLost], start: StartState) -> bool:
        """Prepare restores for subtasks that lost their state; False if the job must fail
        over instead."""
        if not self._recovery.can_restore():
            return False
        for item in lost:
            self._plan_restore(start, item.operator_id, item.subtask, f"state lost: {item.detail}")
        return True

    def _plan_restore(self, start: StartState, operator_id: str, subtask: int, cause: str) -> None:
        plan = self._recovery.restore_for(operator_id, subtask)
        start.plan_restore(operator_id, subtask, plan)
        self._progress.subtask_restore_planned(operator_id, subtask, cause)
        _LOG.info(
            "Job %s: subtask %d of %s restores alone (checkpoint %s + %d changelog epochs): %s",
            self._job_id,
            subtask,
            operator_id,
            self._recovery.base.checkpoint_id if self._recovery.base else "none",
            len(plan.changelog),
            cause,
        )
