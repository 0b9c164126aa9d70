"""How operator state is split among new subtasks on restore (rescaling), for any backend
whose ``OperatorStateHandle`` lists one offset per entry.

Hands each new subtask handles to the old streams restricted to the entries it gets, so
re-splitting reads no byte. Like the operator state backends, not used by the runtime yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkpoint.checkpoint.handles import (
    OperatorStateDistributionMode,
    OperatorStateHandle,
    StateMetaInfo,
    StreamStateHandle,
)

__all__ = ["redistribute_operator_state"]

Mode = OperatorStateDistributionMode


def redistribute_operator_state(
    old: Sequence[Sequence[OperatorStateHandle]], new_parallelism: int
) -> list[list[OperatorStateHandle]]:
    """Per new subtask, the operator state handles it restores from.

    SPLIT_DISTRIBUTE: all entries of a state (old subtasks in order) are cut into
    ``new_parallelism`` contiguous, even parts (sizes differ by at most one), as Flink's
    ``RoundRobinOperatorStateRepartitioner`` does. UNION: every subtask gets every entry.
    BROADCAST: subtask ``i`` gets the copy of old subtask ``i % old_parallelism``.
    """
    if new_parallelism <= 0:
        raise ValueError(f"new_parallelism must be > 0, got {new_parallelism}")
    # per new subtask: delegate -> name -> (offsets, mode)
    assign: list[dict[StreamStateHandle, dict[str, tuple[list[int], Any]]]] = [
        {} for _ in range(new_parallelism)]

    def give(i: int, delegate: StreamStateHandle, name: str, offsets: Sequence[int],
             mode: OperatorStateDistributionMode) -> None:
        slot = assign[i].setdefault(delegate, {}).setdefault(name, ([], mode))
        slot[0].extend(offsets)

    split: dict[str, list[tuple[StreamStateHandle, int]]] = {}
    broadcast: dict[str, list[tuple[StreamStateHandle, Sequence[int]]]] = {}
    for handles in old:
        for h in handles:
            for name, meta in h.state_name_to_partition_offsets.items():
                mode = meta.distribution_mode
                if mode is Mode.SPLIT_DISTRIBUTE:
                    split.setdefault(name, []).extend((h.delegate, o) for o in meta.offsets)
                elif mode is Mode.UNION:
                    for i in range(new_parallelism):
                        give(i, h.delegate, name, meta.offsets, mode)
                else:
                    broadcast.setdefault(name, []).append((h.delegate, meta.offsets))
    for name, entries in split.items():
        base, extra = divmod(len(entries), new_parallelism)
        pos = 0
        for i in range(new_parallelism):
            n = base + (1 if i < extra else 0)
            for delegate, offset in entries[pos : pos + n]:
                give(i, delegate, name, (offset,), Mode.SPLIT_DISTRIBUTE)
            pos += n
    for name, copies in broadcast.items():
        for i in range(new_parallelism):
            delegate, offsets = copies[i % len(copies)]
            give(i, delegate, name, offsets, Mode.BROADCAST)
    return [
        [OperatorStateHandle(
            {name: StateMetaInfo(tuple(offs), mode)
             for name, (offs, mode) in per_name.items()},
            delegate)
         for delegate, per_name in per_delegate.items()]
        for per_delegate in assign
    ]
