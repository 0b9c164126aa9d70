"""The synchronous part of a heap snapshot: the key-group dicts of every table, pinned.

Copy-on-write (``HeapStateTable.pin``) keeps the pinned dicts unchanged while the task goes
on updating state; ``release`` unpins them when the upload is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkpoint.state.heap.table import HeapStateTable, columns_of_group
from sparkpoint.state.keyed_backend import SnapshotView
from sparkpoint.state.snapshot_format import Columns

__all__ = ["HeapSnapshotView"]


class HeapSnapshotView(SnapshotView):
    """Pinned key-group dicts of every table (copy-on-write keeps them unchanged)."""

    supports_objects = True

    def __init__(self, tables: Sequence[HeapStateTable]) -> None:
        self._tables = list(tables)
        self._groups = [t.pin() for t in self._tables]
        self._released = False

    def columns(self, state_id: int, key_group: int) -> Columns | None:
        group = self._groups[state_id].get(key_group)
        if not group:
            return None
        return columns_of_group(self._tables[state_id].meta, group)

    def objects(self, state_id: int, key_group: int) -> dict[Any, Any] | None:
        return self._groups[state_id].get(key_group) or None

    def release(self) -> None:
        if not self._released:
            self._released = True
            for t in self._tables:
                t.unpin()
