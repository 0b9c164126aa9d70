"""``HashMapStateBackend`` configuration: keyed state on the heap, operator state on the heap."""

from __future__ import annotations

from collections.abc import Sequence

from sparkpoint.checkpoint.handles import OperatorStateHandle
from sparkpoint.state.backend import (
    KeyedStateBackend,
    KeyedStateBackendParameters,
    OperatorStateBackend,
    StateBackend,
)
from sparkpoint.state.heap import HeapKeyedStateBackend
from sparkpoint.state.operator_state import DefaultOperatorStateBackend

__all__ = ["HashMapStateBackendConfig"]


class HashMapStateBackendConfig(StateBackend):
    """Creates heap keyed backends (full snapshots, local commits of changed key groups)."""

    def create_keyed_state_backend(self, params: KeyedStateBackendParameters) -> KeyedStateBackend:
        return HeapKeyedStateBackend(params)

    def create_operator_state_backend(
        self, restore_from: Sequence[OperatorStateHandle] = ()
    ) -> OperatorStateBackend:
        return DefaultOperatorStateBackend(restore_from)

    def supports_incremental_checkpoints(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return "HashMapStateBackend"
