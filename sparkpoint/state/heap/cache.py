"""The process-wide cache of heap tables: a task that runs in the same Python worker again
adopts the tables its predecessor left at ``close()`` instead of reloading its files."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from sparkpoint.state.heap.table import HeapStateTable, PendingBlocks

__all__ = ["CachedTables", "cached_state_dirs", "clear_heap_cache", "drop", "keep", "take"]


@dataclass
class CachedTables:
    """The tables of one local state directory and the commit (marker) they hold."""

    marker: dict[str, Any]
    tables: dict[str, HeapStateTable]
    pending: PendingBlocks


_CACHE: dict[str, CachedTables] = {}
_CACHE_LOCK = threading.Lock()


def clear_heap_cache() -> None:
    """Forget every cached heap state of this process (tests, memory pressure)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def cached_state_dirs() -> list[str]:
    """The local state directories whose tables this process keeps cached."""
    with _CACHE_LOCK:
        return list(_CACHE)


def take(state_dir: str) -> CachedTables | None:
    """Remove and return the tables cached for ``state_dir`` (``None``: none)."""
    with _CACHE_LOCK:
        return _CACHE.pop(state_dir, None)


def keep(state_dir: str, cached: CachedTables) -> None:
    """Cache ``cached`` for ``state_dir``."""
    with _CACHE_LOCK:
        # Tables of state whose directory is gone (the job ended and its local state
        # was removed, maybe by another worker) will never be adopted: free them.
        for gone in [d for d in _CACHE if not os.path.isdir(d)]:
            del _CACHE[gone]
        _CACHE[state_dir] = cached


def drop(state_dir: str) -> None:
    """Forget the tables cached for ``state_dir``."""
    with _CACHE_LOCK:
        _CACHE.pop(state_dir, None)
