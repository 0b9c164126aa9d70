"""How broadcast state is assigned to new subtasks on restore (rescaling), for any backend
whose ``OperatorStateHandle`` lists one offset per entry.

Every old subtask holds a copy of the same broadcast state; each new subtask gets handles to
exactly one copy, as Flink's ``RoundRobinOperatorStateRepartitioner`` does for broadcast
state, without reading any byte. The runtime assigns broadcast state with it on every
restore (``runtime/driver/state_assignment.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkpoint.checkpoint.handles import (
    OperatorStateDistributionMode,
    OperatorStateHandle,
    StateMetaInfo,
    StreamStateHandle,
)
from sparkpoint.errors import RestoreError

__all__ = ["redistribute_operator_state"]

Mode = OperatorStateDistributionMode


def redistribute_operator_state(
    old: Sequence[Sequence[OperatorStateHandle]], new_parallelism: int
) -> list[list[OperatorStateHandle]]:
    """Per new subtask, the operator state handles it restores from: for every broadcast
    state, new subtask ``i`` gets the copy of old subtask ``i`` (of ``i % n`` when the job
    grew, ``n`` the old subtasks that hold the state). Other distribution modes are refused
    (sparkpoint writes none)."""
    if new_parallelism <= 0:
        raise ValueError(f"new_parallelism must be > 0, got {new_parallelism}")
    copies: dict[str, list[tuple[StreamStateHandle, Sequence[int]]]] = {}
    for handles in old:
        for h in handles:
            for name, meta in h.state_name_to_partition_offsets.items():
                if meta.distribution_mode is not Mode.BROADCAST:
                    raise RestoreError(
                        f"Operator state {name!r} is {meta.distribution_mode.name} state; "
                        "sparkpoint keeps only broadcast state"
                    )
                copies.setdefault(name, []).append((h.delegate, meta.offsets))
    # per new subtask: delegate -> name -> offsets
    assign: list[dict[StreamStateHandle, dict[str, Sequence[int]]]] = [
        {} for _ in range(new_parallelism)
    ]
    for name, per_old in copies.items():
        for i in range(new_parallelism):
            delegate, offsets = per_old[i % len(per_old)]
            assign[i].setdefault(delegate, {})[name] = offsets
    return [
        [
            OperatorStateHandle(
                {
                    name: StateMetaInfo(tuple(offs), Mode.BROADCAST)
                    for name, offs in per_name.items()
                },
                delegate,
            )
            for delegate, per_name in per_delegate.items()
        ]
        for per_delegate in assign
    ]
