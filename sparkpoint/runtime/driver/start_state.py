"""``StartState``: what the tasks of the next epoch start from, as the driver keeps it
between epochs: the keyed subtasks that restore, the operator (broadcast) state each
subtask carries over, the watermarks and the timestamp generators' maxima."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.runtime.protocol import SubtaskRestore, TaskReport

__all__ = ["StartState"]


@dataclass
class StartState:
    """The job's state between two epochs (shipped in the next ``EpochSpec``).

    A restore (job start, failover) sets all of it; every accepted epoch updates it from
    its task reports.
    """

    # operator id -> subtask -> what it restores in the next run (empty: local state)
    restore: dict[str, dict[int, SubtaskRestore]] = field(default_factory=dict)
    # Operator (broadcast) state each subtask starts the next epoch from: what the
    # accepted run of the last epoch ended with (runtime/task/carried_state.py).
    operator_state: dict[str, dict[int, tuple[Any, ...]]] = field(default_factory=dict)
    watermarks: dict[str, int] = field(default_factory=dict)
    # max timestamp per operator@scope (scope: the split, or the subtask after a shuffle)
    generators: dict[str, int] = field(default_factory=dict)

    def plan_restore(self, operator_id: str, subtask: int, restore: SubtaskRestore) -> None:
        """``subtask`` of ``operator_id`` restores ``restore`` in the next run."""
        self.restore.setdefault(operator_id, {})[subtask] = restore

    def planned_restore(self, operator_id: str, subtask: int) -> SubtaskRestore | None:
        """The restore planned for ``subtask`` of ``operator_id`` (None: none)."""
        return self.restore.get(operator_id, {}).get(subtask)

    def absorb(self, reports: Iterable[TaskReport]) -> None:
        """Take what the tasks of an accepted run ended with (its planned restores are
        done)."""
        self.restore = {}
        # Subtasks usually end with identical broadcast state: keep one handle object per
        # content, so the next EpochSpec pickles it once.
        same: dict[Any, Any] = {}
        for report in reports:
            for carried in report.operator_states:
                handle = carried.handle
                if handle is not None:
                    handle = same.setdefault(_content(handle), handle)
                self.operator_state.setdefault(carried.operator_id, {})[carried.subtask] = (
                    (handle,) if handle is not None else ()
                )
            self.watermarks.update(report.watermarks)
            for key, max_ts in report.max_timestamps.items():  # key: operator@split/subtask
                if max_ts is not None:
                    self.generators[key] = max(self.generators.get(key, max_ts), max_ts)


def _content(handle: Any) -> Any:
    """What makes two in-memory operator state handles equal: their bytes and offsets."""
    offsets = tuple(
        sorted(
            (name, meta.offsets) for name, meta in handle.state_name_to_partition_offsets.items()
        )
    )
    return getattr(handle.delegate, "data", handle.delegate), offsets
