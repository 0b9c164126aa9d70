"""The source coordinator: every source's split enumerator on the driver (Flink's
``SourceCoordinator``). It plans the bounded range of each split an epoch reads, commits
the ranges of accepted epochs, snapshots or restores the enumerators' positions (checking
restored splits first), tracks idle splits for ``with_idleness`` and tells the sources
when a checkpoint completed (Kafka commits its consumer group's offsets then)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.connectors.source import SplitEnumerator, SplitRange
from sparkpoint.runtime.driver.split_idleness import SplitIdleness
from sparkpoint.runtime.graph import Plan

__all__ = ["SourceCoordinator"]


class SourceCoordinator:
    """The split enumerators of one job, keyed by their source operator's id."""

    def __init__(self, plan: Plan, default_parallelism: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self._enumerators = {
            st.source.operator_id: SplitEnumerator(
                st.source.source, st.source.parallelism or default_parallelism
            )
            for st in plan.stages
            if st.source is not None
        }
        self._stage_of_source = {
            st.source.operator_id: st.id for st in plan.stages if st.source is not None
        }
        self.source_stages = frozenset(self._stage_of_source.values())
        self.idleness = SplitIdleness(plan, clock)

    def enumerators(self) -> dict[str, SplitEnumerator]:
        """Source operator id -> its enumerator (its splits and their positions)."""
        return dict(self._enumerators)

    def plan_epoch(self, max_records_per_split: int) -> dict[int, list[SplitRange]]:
        """Source stage id -> the ranges its splits read in the next epoch."""
        out: dict[int, list[SplitRange]] = {}
        for op_id, enum in self._enumerators.items():
            out[self._stage_of_source[op_id]] = enum.plan_epoch(max_records_per_split)
        self.idleness.observe(
            out,
            {self._stage_of_source[op]: list(e.splits) for op, e in self._enumerators.items()},
        )
        return out

    def end_of_input(self, ranges: Mapping[int, list[SplitRange]]) -> bool:
        """Whether an epoch reading ``ranges`` reads the last records of every (bounded)
        source."""
        for op_id, enum in self._enumerators.items():
            if not enum.source.finishes_when_splits_end():
                return False
            planned = {r.split_id: r for r in ranges[self._stage_of_source[op_id]]}
            for split in enum.splits.values():
                r = planned.get(split.split_id)
                if not split.finished and (r is None or not r.last):
                    return False
        return True

    def commit_epoch(self, ranges: Mapping[int, list[SplitRange]]) -> None:
        """The epoch that read ``ranges`` was accepted: every split moves past its range."""
        for op_id, enum in self._enumerators.items():
            enum.commit_epoch(ranges[self._stage_of_source[op_id]])

    def lag(self) -> dict[str, dict[str, int]]:
        """Source operator id -> split id -> records available and not yet read (sources
        that cannot tell are left out)."""
        out = {op_id: enum.lag() for op_id, enum in self._enumerators.items()}
        return {op_id: lag for op_id, lag in out.items() if lag}

    def skipped(self) -> dict[str, dict[str, int]]:
        """Source operator id -> split id -> records skipped unread (sources that can skip;
        the others are left out)."""
        out = {op_id: enum.skipped() for op_id, enum in self._enumerators.items()}
        return {op_id: skipped for op_id, skipped in out.items() if skipped}

    def snapshot_state(self) -> dict[str, list[dict[str, Any]]]:
        """Every enumerator's position (stored in a checkpoint's master state)."""
        return {op: e.snapshot_state() for op, e in self._enumerators.items()}

    def check_restored(self, sources: Mapping[str, Any], where: str) -> None:
        """Let each source refuse the splits a checkpoint names for it (before any I/O)."""
        for op_id, enum in self._enumerators.items():
            if op_id in sources:
                enum.check_restored(sources[op_id], where, f"master state sources[{op_id!r}]")

    def restore_state(
        self, sources: Mapping[str, list[dict[str, Any]]] | None, where: str = "master state"
    ) -> None:
        """Restore the positions of a checkpoint; sources it does not name (or all, with
        ``None``) start from the beginning. Every restored split is checked by its source
        before any is used: a snapshot is input from outside."""
        self.idleness.reset()
        if sources is not None:
            self.check_restored(sources, where)
        for op_id, enum in self._enumerators.items():
            if sources is not None and op_id in sources:
                enum.restore_state(sources[op_id], where, f"master state sources[{op_id!r}]")
            else:
                enum.reset()

    def notify_checkpoint_complete(
        self, checkpoint_id: int, sources: Mapping[str, list[dict[str, Any]]]
    ) -> None:
        """Checkpoint ``checkpoint_id`` completed with the split positions ``sources``
        (its master state's): each source may act on it (Flink's
        ``notifyCheckpointComplete``)."""
        for op_id, enum in self._enumerators.items():
            if op_id in sources:
                enum.source.notify_checkpoint_complete(checkpoint_id, sources[op_id])
