"""``HeapStateTable``: one state's entries as Python objects, a dict per key group.

Copy-on-write keeps snapshots consistent while updates go on: a snapshot *pins* the key-group
dicts it reads; the first write to a pinned group replaces it by a copy, and the first
in-place change of a list or map value copies that container. Writes also record which key
groups changed since the last local commit (``dirty``), so commits rewrite only those.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.errors import StateLostError, UntrustedSnapshotError
from sparkpoint.state import pickling
from sparkpoint.state.column_codecs import decode_column, encode_column
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.table import MISSING, RegisteredStateMeta, StateTable

__all__ = ["HeapStateTable", "KeyGroups", "PendingBlocks"]


class PendingBlocks:
    """Key-group blocks read from a snapshot or local commit but not decoded yet.

    Decoding happens on first access to a key group (``KeyGroups.__missing__``), so a
    restore or a reopen costs reading bytes, and a key group nobody touches before the next
    local commit is written back as the same bytes. One instance is shared by the tables
    of a backend, since a block holds every state of its key group.
    """

    def __init__(
        self, origin: str = "local heap state", error: type[Exception] = StateLostError
    ) -> None:
        self.blocks: dict[int, tuple[bytes, list[HeapStateTable | None]]] = {}
        # key group -> per-epoch deltas applied, in order, after its block is decoded
        self.deltas: dict[int, list[tuple[HeapStateTable, dict[Any, Any], list[Any]]]] = {}
        self._lock = threading.Lock()
        self._origin = origin
        self._error = error

    def add(self, key_group: int, block: bytes, tables: list[HeapStateTable | None]) -> None:
        """Register the ``pickle`` block of ``key_group``; ``tables[state_id]`` receive it."""
        for t in tables:
            if t is not None:
                dict.pop(t.groups, key_group, None)
        self.blocks[key_group] = (block, tables)

    def add_delta(
        self, key_group: int, table: HeapStateTable, updates: dict[Any, Any], deleted: list[Any]
    ) -> None:
        """Apply a delta of ``table`` in ``key_group`` after its pending block and deltas
        (at once when nothing of the key group is pending and the table holds it)."""
        pending = key_group in self.blocks or key_group in self.deltas
        group = dict.get(table.groups, key_group)
        if not pending and group is not None:
            group.update(updates)
            for key in deleted:
                group.pop(key, None)
            return
        dict.pop(table.groups, key_group, None)  # the next access decodes and applies
        self.deltas.setdefault(key_group, []).append((table, updates, deleted))

    def drop(self, key_group: int) -> None:
        """Forget the pending block and deltas of ``key_group``."""
        self.blocks.pop(key_group, None)
        self.deltas.pop(key_group, None)

    def load(self, key_group: int) -> None:
        """Decode the block of ``key_group`` (if still pending) into its tables, then apply
        its deltas."""
        with self._lock:
            entry = self.blocks.pop(key_group, None)
            deltas = self.deltas.pop(key_group, None)
            if entry is not None:
                block, tables = entry
                try:
                    decoded = pickling.loads(block, f"the {self._origin} of key group {key_group}")
                except UntrustedSnapshotError:
                    raise
                except Exception as e:  # any decode failure means corrupt bytes
                    raise self._error(
                        f"The {self._origin} of key group {key_group} is corrupt: {e!r}"
                    ) from e
                try:
                    placed = []
                    for sid, objects in decoded:
                        if not (type(sid) is int and 0 <= sid < len(tables)):
                            raise IndexError(f"state id {sid!r} of {len(tables)} states")
                        if not isinstance(objects, dict):
                            raise TypeError(f"entries of state {sid} that are not a dict")
                        placed.append((tables[sid], objects))
                except (IndexError, TypeError, ValueError) as e:
                    raise self._error(
                        f"The {self._origin} of key group {key_group} is corrupt: {e!r}"
                    ) from None
                for table, objects in placed:
                    if table is not None:
                        dict.__setitem__(table.groups, key_group, objects)
            for table, updates, deleted in deltas or ():
                group = dict.get(table.groups, key_group)
                if group is None:
                    group = {}
                    dict.__setitem__(table.groups, key_group, group)
                group.update(updates)
                for key in deleted:
                    group.pop(key, None)

    def load_all(self) -> None:
        """Decode every pending block (and apply every pending delta)."""
        for kg in [*self.blocks, *self.deltas]:
            self.load(kg)

    def names_of(self, key_group: int) -> tuple[bytes, list[str | None]] | None:
        """The raw block of a pending key group and its state names by id (else None)."""
        entry = self.blocks.get(key_group)
        if entry is None or key_group in self.deltas:
            return None
        block, tables = entry
        return block, [None if t is None else t.meta.name for t in tables]


class KeyGroups(dict):  # type: ignore[type-arg]
    """``key group -> {key: stored}``; a missing group in range is decoded or created."""

    __slots__ = ("key_group_range", "pending")

    def __init__(self, key_group_range: KeyGroupRange) -> None:
        super().__init__((kg, {}) for kg in key_group_range)
        self.key_group_range = key_group_range
        self.pending: PendingBlocks | None = None

    def __missing__(self, key_group: int) -> dict[Any, Any]:
        if self.pending is not None:
            self.pending.load(key_group)
            if dict.__contains__(self, key_group):
                return dict.__getitem__(self, key_group)  # type: ignore[no-any-return]
        if not self.key_group_range.contains(key_group):
            raise KeyError(key_group)
        group: dict[Any, Any] = {}
        dict.__setitem__(self, key_group, group)
        return group

    def materialize(self) -> None:
        """Decode every pending block and make sure every key group of the range is present."""
        if self.pending is not None:
            self.pending.load_all()
        for kg in self.key_group_range:
            self[kg]


class HeapStateTable(StateTable):
    """Entries of one state held on the heap (see the module docstring)."""

    def __init__(self, meta: RegisteredStateMeta, key_group_range: KeyGroupRange) -> None:
        super().__init__(meta)
        self.groups = KeyGroups(key_group_range)
        self._range = key_group_range
        self.dirty: set[int] = set()
        # Per key group, the keys written since the last commit (a local commit writes only
        # their values: a delta); ``whole``: key groups changed in bulk (rewritten whole).
        self.touched: dict[int, set[Any]] = {kg: set() for kg in key_group_range}
        self.whole: set[int] = set()
        # Key groups whose next write takes the slow path: not yet dirty, or pinned.
        self._watch: set[int] = set(key_group_range)
        self._pinned: set[int] = set()
        # Keys whose list/map container was copied since the newest snapshot (None: no
        # snapshot running, containers may change in place).
        self._fresh: set[Any] | None = None
        self._active_snapshots = 0
        self._pin_lock = threading.Lock()
        self._cleanup_cursor: Iterator[tuple[int, Any]] = iter(())

    # -- copy-on-write -------------------------------------------------------------------

    def _group_w(self, kg: int) -> dict[Any, Any]:
        """The dict of ``kg`` for writing (copied first if a snapshot pins it)."""
        if kg in self._watch:
            self._watch.discard(kg)
            self.dirty.add(kg)
            pinned = self._pinned  # read once: an upload thread may replace it
            if kg in pinned:
                pinned.discard(kg)
                self.groups[kg] = dict(self.groups[kg])
        return self.groups[kg]

    def _container_w(self, group: dict[Any, Any], key: Any, factory: type) -> Any:
        """The list/dict value of ``key`` for in-place change (copied while snapshotted)."""
        fresh = self._fresh  # read once: an upload thread may reset it concurrently
        current = group.get(key)
        if current is None:
            current = group[key] = factory()
            if fresh is not None:
                fresh.add(key)
        elif fresh is not None and key not in fresh:
            current = group[key] = factory(current)
            fresh.add(key)
        return current

    def pin(self) -> dict[int, dict[Any, Any]]:
        """Start a snapshot: the current key-group dicts, frozen until ``unpin``."""
        self.groups.materialize()
        with self._pin_lock:
            self._active_snapshots += 1
            self._pinned = set(self.groups)
            self._watch |= self._pinned
            self._fresh = set()
            return dict(self.groups)

    def unpin(self) -> None:
        """A snapshot finished (called from the upload thread); drop bookkeeping when no
        snapshot is left. Containers already copied stay copied, which is harmless."""
        with self._pin_lock:
            self._active_snapshots -= 1
            if self._active_snapshots <= 0:
                self._active_snapshots = 0
                self._pinned = set()
                self._fresh = None

    def snapshot_running(self) -> bool:
        """Whether a snapshot still reads pinned key groups of this table."""
        return self._active_snapshots > 0

    def mark_committed(self) -> None:
        """Every change is persisted: start tracking dirty groups afresh."""
        for kg in self.dirty:
            self.touched[kg].clear()
        self.dirty.clear()
        self.whole.clear()
        self._watch.update(self._range)

    def value_accessors(self, ctx: Any) -> tuple[Callable[[], Any], Callable[[Any], None]]:
        """Fast ``value()``/``update(v)`` of a ValueState without TTL over this table."""
        groups, watch, group_w, delete = self.groups, self._watch, self._group_w, self.delete
        touched = self.touched

        def value() -> Any:
            return groups[ctx.current_key_group].get(ctx.current_key)

        def update(v: Any) -> None:
            kg = ctx.current_key_group
            if v is None:
                delete(kg, ctx.current_key)
            elif kg in watch:
                group_w(kg)[ctx.current_key] = v
                touched[kg].add(ctx.current_key)
            else:
                groups[kg][ctx.current_key] = v
                touched[kg].add(ctx.current_key)

        return value, update

    # -- incremental TTL cleanup ---------------------------------------------------------

    def _entries_to_check(self) -> Iterator[tuple[int, Any]]:
        for kg in self._range:
            for key in list(self.groups[kg]):
                yield kg, key

    def cleanup_expired_step(
        self, count: int, now: int, ttl_millis: int, skip_key: Any = MISSING
    ) -> int:
        """Check the next ``count`` keys (except ``skip_key``) for expired values (Flink's
        incremental cleanup on state access); returns how many keys were removed entirely."""
        removed = 0
        kind = self.meta.kind
        for _ in range(count):
            try:
                kg, key = next(self._cleanup_cursor)
            except StopIteration:
                self._cleanup_cursor = self._entries_to_check()
                return removed
            stored = self.groups[kg].get(key)
            if stored is None or (key == skip_key and type(key) is type(skip_key)):
                continue
            if kind is StateKind.MAP:
                for uk, v in list(stored.items()):
                    if v.timestamp + ttl_millis <= now:
                        self.map_remove(kg, key, uk)
                removed += key not in self.groups[kg]
            elif kind is StateKind.LIST:
                alive = [e for e in stored if e.timestamp + ttl_millis > now]
                if not alive:
                    self.delete(kg, key)
                    removed += 1
                elif len(alive) != len(stored):
                    self.put(kg, key, alive)
            elif stored.timestamp + ttl_millis <= now:
                self.delete(kg, key)
                removed += 1
        return removed

    # -- single values -------------------------------------------------------------------

    def get(self, key_group: int, key: Any) -> Any:
        return self.groups[key_group].get(key)

    def put(self, key_group: int, key: Any, stored: Any) -> None:
        if key_group in self._watch:
            self._group_w(key_group)[key] = stored
        else:
            self.groups[key_group][key] = stored
        self.touched[key_group].add(key)

    def delete(self, key_group: int, key: Any) -> None:
        if key in self.groups[key_group]:
            del self._group_w(key_group)[key]
            self.touched[key_group].add(key)

    def append(self, key_group: int, key: Any, elements: list[Any]) -> None:
        self.touched[key_group].add(key)
        group = self._group_w(key_group)
        current = group.get(key)
        if current is None:
            group[key] = list(elements)
            if self._fresh is not None:
                self._fresh.add(key)
            return
        self._container_w(group, key, list).extend(elements)

    # -- maps ----------------------------------------------------------------------------

    def map_get(self, key_group: int, key: Any, user_key: Any) -> Any:
        entries = self.groups[key_group].get(key)
        if entries is None:
            return MISSING
        return entries.get(user_key, MISSING)

    def map_put(self, key_group: int, key: Any, user_key: Any, stored: Any) -> None:
        self._container_w(self._group_w(key_group), key, dict)[user_key] = stored
        self.touched[key_group].add(key)

    def map_remove(self, key_group: int, key: Any, user_key: Any) -> None:
        entries = self.groups[key_group].get(key)
        if entries is None or user_key not in entries:
            return
        self.touched[key_group].add(key)
        group = self._group_w(key_group)
        if len(entries) == 1:
            del group[key]
            return
        del self._container_w(group, key, dict)[user_key]

    def map_entries(self, key_group: int, key: Any) -> list[tuple[Any, Any]]:
        entries = self.groups[key_group].get(key)
        return [] if entries is None else list(entries.items())

    def map_is_empty(self, key_group: int, key: Any) -> bool:
        return not self.groups[key_group].get(key)

    def pop_map_entries(
        self, key_groups: Iterable[int], select: Callable[[Any], bool]
    ) -> list[tuple[int, Any, Any]]:
        hits: list[tuple[int, Any, Any]] = []
        for kg in key_groups:
            group = self.groups[kg]
            found = [
                (kg, key, uk) for key, entries in group.items() for uk in entries if select(uk)
            ]
            for _kg, key, uk in found:
                self.map_remove(kg, key, uk)
            hits.extend(found)
        return hits

    def pop_due(
        self, key_groups: Iterable[int], limits: tuple[int, int]
    ) -> tuple[list[tuple[int, int, Any, int]], list[int | None]]:
        """Timers (user keys ``(domain, timestamp)``): remove every entry at or before
        ``limits[domain]``; returns ``(timestamp, domain, key, key group)`` of each and the
        earliest timestamp left per domain (``KeyedStateBackend.pop_due_timers``). One pass
        per key group, then one removal per key (a key whose timers all fired goes whole)."""
        hits: list[tuple[int, int, Any, int]] = []
        earliest: list[int | None] = [None, None]
        for kg in key_groups:
            group = self.groups[kg]
            if not group:
                continue
            emptied: list[Any] = []
            partial: list[tuple[Any, list[Any]]] = []
            for key, entries in group.items():
                due: list[Any] = []
                for user_key in entries:
                    domain, ts = user_key
                    if ts <= limits[domain]:
                        hits.append((ts, domain, key, kg))
                        due.append(user_key)
                    else:
                        first = earliest[domain]
                        if first is None or ts < first:
                            earliest[domain] = ts
                if due:
                    if len(due) == len(entries):
                        emptied.append(key)
                    else:
                        partial.append((key, due))
            if emptied or partial:
                writable = self._group_w(kg)
                touched = self.touched[kg]
                for key in emptied:
                    del writable[key]
                touched.update(emptied)
                for key, due in partial:
                    container = self._container_w(writable, key, dict)
                    for user_key in due:
                        del container[user_key]
                    touched.add(key)
        return hits, earliest

    # -- enumeration and bytes -----------------------------------------------------------

    def keys(self) -> Iterator[Any]:
        self.groups.materialize()
        for group in list(self.groups.values()):
            yield from list(group)

    def iter_entries_bytes(self, key_group: int) -> Iterator[tuple[bytes, bytes | None, bytes]]:
        yield from _rows(self.meta, self.groups[key_group])

    def put_entry_bytes(
        self, key_group: int, key: bytes, user_key: bytes | None, value: bytes
    ) -> None:
        meta = self.meta
        k = meta.decode_key(key)
        if user_key is None:
            self.put(key_group, k, meta.decode_value(value))
        else:
            self.map_put(key_group, k, meta.decode_user_key(user_key), meta.decode_value(value))

    def put_entries_bytes(
        self,
        key_group: int,
        keys: list[bytes],
        user_keys: list[bytes | None],
        values: list[bytes],
    ) -> None:
        meta = self.meta
        if meta.kind is StateKind.MAP:
            super().put_entries_bytes(key_group, keys, user_keys, values)
            return
        group = self._group_w(key_group)
        self.whole.add(key_group)
        kdec, vdec = meta.decode_key, meta.decode_value
        group.update(zip(map(kdec, keys), map(vdec, values)))

    def put_entries_arrow(self, key_group: int, keys: Any, user_keys: Any, values: Any) -> None:
        meta = self.meta
        if meta.kind is StateKind.MAP:
            super().put_entries_arrow(key_group, keys, user_keys, values)
            return
        decoded_keys = decode_column(meta.key_serializer, keys)
        if not meta.ttl and meta.kind is not StateKind.LIST:
            decoded = decode_column(meta.value_serializer, values)
        else:
            decoded = [meta.decode_value(v) for v in values.to_pylist()]
        self._group_w(key_group).update(zip(decoded_keys, decoded))
        self.whole.add(key_group)

    def put_group_objects(self, key_group: int, objects: dict[Any, Any]) -> None:
        group = self._group_w(key_group)
        self.whole.add(key_group)
        if self.meta.kind is StateKind.MAP:
            for key, entries in objects.items():
                group.setdefault(key, {}).update(entries)
        else:
            group.update(objects)

    def clear(self) -> None:
        self.groups.materialize()
        for kg in list(self.groups):
            if self.groups[kg]:
                self._group_w(kg)
                self.groups[kg] = {}
                self.whole.add(kg)
        if self._fresh is not None:
            self._fresh.clear()


def columns_of_group(meta: RegisteredStateMeta, group: dict[Any, Any]) -> tuple[Any, Any, Any]:
    """Canonical byte columns of one key-group dict (arrays where vectorised)."""
    kenc = meta.key_serializer.serialize
    venc = meta.encode_value
    if meta.kind is not StateKind.MAP:
        key_column = encode_column(meta.key_serializer, list(group))
        if not meta.ttl and meta.kind is not StateKind.LIST:
            return key_column, None, encode_column(meta.value_serializer, list(group.values()))
        return key_column.to_pylist(), None, [venc(v) for v in group.values()]
    ukenc = meta.encode_user_key
    keys: list[bytes] = []
    uks: list[bytes] = []
    vals: list[bytes] = []
    for k, entries in group.items():
        kb = kenc(k)
        for uk, v in entries.items():
            keys.append(kb)
            uks.append(ukenc(uk))
            vals.append(venc(v))
    return keys, uks, vals


def _rows(
    meta: RegisteredStateMeta, group: dict[Any, Any]
) -> Iterator[tuple[bytes, bytes | None, bytes]]:
    keys, uks, vals = (
        c.to_pylist() if isinstance(c, pa.Array) else c for c in columns_of_group(meta, group)
    )
    if uks is None:
        for k, v in zip(keys, vals):
            yield k, None, v
    else:
        yield from zip(keys, uks, vals)
