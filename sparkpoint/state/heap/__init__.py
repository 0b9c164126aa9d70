"""The heap state backend (``HashMapStateBackend``): keyed state as Python objects, committed
locally as pickle files per key group, and operator state on the heap."""

from sparkpoint.state.heap.backend import HeapKeyedStateBackend
from sparkpoint.state.heap.cache import cached_state_dirs, clear_heap_cache
from sparkpoint.state.heap.operator_state import (
    BroadcastState,
    DefaultOperatorStateBackend,
    ReadOnlyBroadcastState,
)

__all__ = [
    "BroadcastState",
    "DefaultOperatorStateBackend",
    "HeapKeyedStateBackend",
    "ReadOnlyBroadcastState",
    "cached_state_dirs",
    "clear_heap_cache",
]
