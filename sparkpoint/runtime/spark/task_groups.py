"""Which subtasks each Spark task of a stage runs, and which shuffle partition carries each
channel of an exchange.

A stage with more subtasks than its executors have task slots runs several subtasks, one
after the other, in one Spark task (a *task group*): every subtask still has its own
operators, state, timers, sink writer and report, so what a subtask computes does not
change; what is shared is Spark's and the Python worker's cost per task (scheduling, the
task closure, the shuffle blocks: an exchange has one shuffle partition per consumer task
group instead of one per channel). A keyed stage groups only subtasks that prefer the same
executor, and each group prefers that executor.

At most ``tasks_per_core`` groups per core: a stage of ``p`` subtasks on ``c`` cores runs
``min(p, c * tasks_per_core)`` Spark tasks. Groups are contiguous runs of subtasks (of one
executor's subtasks, for keyed stages), as equal in size as possible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["StageGroups", "channel_partitions", "group_subtasks"]


@dataclass(frozen=True)
class StageGroups:
    """The Spark tasks of one stage for one run: the subtasks each runs, and where."""

    groups: tuple[tuple[int, ...], ...]
    locations: tuple[str, ...]  # preferred location of each group ("" for none)


def _chunks(subtasks: Sequence[int], count: int) -> list[tuple[int, ...]]:
    """``subtasks`` cut into ``count`` contiguous runs whose sizes differ by at most one."""
    size, extra = divmod(len(subtasks), count)
    out: list[tuple[int, ...]] = []
    start = 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(tuple(subtasks[start:end]))
        start = end
    return out


def group_subtasks(
    count: int,
    locations: Sequence[str] | None,
    cores: Mapping[str, int],
    tasks_per_core: int,
) -> StageGroups:
    """Groups of the ``count`` subtasks of a stage. ``locations`` gives each subtask's
    preferred location (keyed stages; ``None`` or ``""``: none); ``cores`` the cores of
    each live executor's location. Subtasks without a location share all cores."""
    total = max(1, sum(cores.values()))
    by_location: dict[str, list[int]] = {}
    for sub in range(count):
        loc = locations[sub] if locations is not None and sub < len(locations) else ""
        by_location.setdefault(loc, []).append(sub)
    groups: list[tuple[tuple[int, ...], str]] = []
    for loc, subs in by_location.items():
        slots = max(1, cores.get(loc, total) if loc else total) * max(1, tasks_per_core)
        for chunk in _chunks(subs, min(len(subs), slots)):
            groups.append((chunk, loc))
    groups.sort(key=lambda g: g[0][0])
    return StageGroups(tuple(g for g, _ in groups), tuple(loc for _, loc in groups))


def channel_partitions(
    consumers: Sequence[tuple[int, tuple[tuple[int, ...], ...]]], channels: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shuffle partition of every channel of an exchange whose consumers are
    ``(channel_offset, groups)``, and the first partition of each consumer (in the order
    given): consumer ``i`` reads partitions ``[first[i], first[i] + len(groups_i))``."""
    table = [0] * channels
    first: list[int] = []
    base = 0
    for offset, groups in consumers:
        first.append(base)
        for j, group in enumerate(groups):
            for sub in group:
                table[offset + sub] = base + j
        base += len(groups)
    return tuple(table), tuple(first)
