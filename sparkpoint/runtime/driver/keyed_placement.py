"""Where a job's keyed subtasks run: the driver's ``Placement`` of every keyed stage, what
each run asks Spark for, and what the tasks' reports show of where they actually ran."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.protocol import TaskReport
from sparkpoint.runtime.spark.placement import ExecutorSlot, Move, Placement

__all__ = ["KeyedOperator", "KeyedPlacement"]

_LOG = logging.getLogger("sparkpoint.job")


@dataclass(frozen=True)
class KeyedOperator:
    """A keyed operator: its parallelism and the executor each subtask is placed on (None:
    not placed yet)."""

    operator_id: str
    name: str
    parallelism: int
    executors: tuple[str | None, ...]


class KeyedPlacement:
    """The executor of every keyed subtask of one job (stage id, subtask)."""

    def __init__(self, job_id: str, plan: Plan) -> None:
        self._job_id = job_id
        self._plan = plan
        self._placement = Placement()
        self.stages = {st.id: st.parallelism for st in plan.stages if st.keyed}

    def update(self, executors: Mapping[str, ExecutorSlot]) -> list[Move]:
        """Adopt the live ``executors``; returns the subtasks that moved off a lost one."""
        return self._placement.update(executors, self.stages)

    def preferred(self) -> dict[tuple[int, int], str | None]:
        """(stage, subtask) -> the executor the subtask is placed on."""
        return {
            (stage, sub): self._placement.executor_of(stage, sub)
            for stage, p in self.stages.items()
            for sub in range(p)
        }

    def locations(self) -> dict[int, list[str]]:
        """Keyed stage -> the preferred location of each of its subtasks."""
        return {stage: self._placement.locations(stage) for stage in self.stages}

    def operator_executors(self) -> dict[str, tuple[str, ...]]:
        """Keyed operator id -> executor of each of its subtasks ("" when not placed)."""
        out: dict[str, tuple[str, ...]] = {}
        for st in self._plan.stages:
            if st.id in self.stages:
                executors = tuple(
                    self._placement.executor_of(st.id, i) or "" for i in range(st.parallelism)
                )
                for node in st.keyed_nodes:
                    out[node.operator_id] = executors
        return out

    def keyed_operators(self) -> list[KeyedOperator]:
        """Every keyed operator of the plan with its subtasks' executors."""
        operators = []
        for stage in self._plan.stages:
            if not stage.keyed:
                continue
            executors = tuple(
                self._placement.executor_of(stage.id, i) for i in range(stage.parallelism)
            )
            for node in stage.keyed_nodes:
                operators.append(
                    KeyedOperator(node.operator_id, node.name, stage.parallelism, executors)
                )
        return operators

    def observe(
        self, reports: Sequence[TaskReport], preferred: Mapping[tuple[int, int], str | None]
    ) -> tuple[list[TaskReport], int]:
        """Take where the keyed tasks of an accepted run ran: a subtask the scheduler ran
        elsewhere stays there. Returns the keyed tasks' reports and how many ran where
        they were placed."""
        keyed = [r for r in reports if r.stage in self.stages]
        on_preferred = 0
        for r in keyed:
            if preferred.get((r.stage, r.subtask)) == r.executor.executor_id:
                on_preferred += 1
            elif self._placement.observe(r.stage, r.subtask, r.executor.executor_id):
                _LOG.info(
                    "Job %s: keyed subtask %d of stage %d ran on executor %s, not on %s; "
                    "it stays there",
                    self._job_id,
                    r.subtask,
                    r.stage,
                    r.executor.executor_id,
                    preferred.get((r.stage, r.subtask)),
                )
        return keyed, on_preferred
