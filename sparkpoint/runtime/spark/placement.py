"""Which executor each keyed subtask runs on (where its local state lives).

The driver keeps one executor per keyed subtask, as Spark's ``StateStoreCoordinator``
keeps the location of each loaded state store. New subtasks go to the live executor with
the fewest subtasks per core; a subtask moves only when its executor is gone (or when the
scheduler ran it elsewhere anyway: its state is then where it ran). Pure bookkeeping: the
Spark side (``spark_cluster``) lists executors and turns locations into preferred
locations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ExecutorSlot", "Move", "Placement"]


@dataclass(frozen=True)
class ExecutorSlot:
    """A live executor: its id, the host its block manager registered, its cores."""

    executor_id: str
    host: str
    cores: int

    @property
    def location(self) -> str:
        """Spark's executor-level preferred location (``TaskLocation`` syntax)."""
        return f"executor_{self.host}_{self.executor_id}"


@dataclass(frozen=True)
class Move:
    """A keyed subtask placed on another executor because its own one is gone."""

    stage: int
    subtask: int
    old_executor: str | None
    new_executor: str


class Placement:
    """The executor of every keyed subtask of a job."""

    def __init__(self) -> None:
        self.executors: dict[str, ExecutorSlot] = {}
        self.assigned: dict[int, list[str | None]] = {}
        self.version = 0  # changes whenever some subtask's executor changes

    def update(
        self, executors: Mapping[str, ExecutorSlot], stages: Mapping[int, int]
    ) -> list[Move]:
        """Adopt the live ``executors`` and place every subtask of ``stages`` (stage id ->
        parallelism) that has no live executor; returns the subtasks that moved."""
        self.executors = dict(executors)
        moves: list[Move] = []
        for stage, parallelism in stages.items():
            current = self.assigned.get(stage, [])
            slots: list[str | None] = [*current[:parallelism]]
            slots += [None] * (parallelism - len(slots))
            self.assigned[stage] = slots
        if not self.executors:
            return moves  # none known yet: no preference until there are some
        for stage, slots in self.assigned.items():
            for subtask, executor in enumerate(slots):
                if executor is not None and executor in self.executors:
                    continue
                target = self._least_loaded()
                slots[subtask] = target
                moves.append(Move(stage, subtask, executor, target))
        if moves:
            self.version += 1
        return moves

    def _least_loaded(self) -> str:
        load = {e: 0 for e in self.executors}
        for slots in self.assigned.values():
            for executor in slots:
                if executor in load:
                    load[executor] += 1
        return min(
            self.executors.values(),
            key=lambda s: ((load[s.executor_id] + 1) / max(1, s.cores), _order(s.executor_id)),
        ).executor_id

    def executor_of(self, stage: int, subtask: int) -> str | None:
        """The executor ``subtask`` of ``stage`` is placed on."""
        slots = self.assigned.get(stage, [])
        return slots[subtask] if subtask < len(slots) else None

    def locations(self, stage: int) -> list[str]:
        """The preferred location of each subtask of ``stage`` ("" where none is known)."""
        out = []
        for executor in self.assigned.get(stage, []):
            slot = self.executors.get(executor) if executor is not None else None
            out.append(slot.location if slot is not None else "")
        return out

    def observe(self, stage: int, subtask: int, executor_id: str) -> bool:
        """A subtask ran (and committed its state) on ``executor_id``; returns whether that
        changed its placement."""
        slots = self.assigned.get(stage)
        if slots is None or subtask >= len(slots) or slots[subtask] == executor_id:
            return False
        if executor_id not in self.executors:
            return False
        slots[subtask] = executor_id
        self.version += 1
        return True


def _order(executor_id: str) -> tuple[int, str]:
    """Numeric executor ids in numeric order, others after them."""
    return (int(executor_id), "") if executor_id.isdigit() else (1 << 62, executor_id)
