"""What every keyed backend shares: current key, state registration, full snapshots, restore.

A concrete backend (heap, RocksDB) supplies ``_create_table`` and ``_snapshot_columns`` (a
consistent, columnar view of each state's key groups) plus the local-commit methods of
``KeyedStateBackend``; the state objects, TTL, the full snapshot / savepoint writer and the
rescaling restore come from here, so both backends write and read the same format.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from struct import error as struct_error
from typing import Any

from sparkpoint.checkpoint.handles import KeyedStateHandle, KeyGroupsStateHandle
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.errors import RestoreError
from sparkpoint.state.backend import KeyedStateBackend, KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import StateDescriptor, StateKind
from sparkpoint.state.full_restore import PickleBlockSink, restore_key_groups
from sparkpoint.state.primitives import State, create_state
from sparkpoint.state.serializers import PickleSerializer, TypeSerializer
from sparkpoint.state.snapshot_format import (
    Columns,
    SnapshotHeader,
    arrow_block,
    pickle_block,
    write_key_groups_snapshot,
)
from sparkpoint.state.table import RegisteredStateMeta, StateTable

__all__ = ["AbstractKeyedStateBackend", "SnapshotView"]

_KG_CACHE_SIZE = 1 << 20
# Types whose equality matches their key hash (1 == 1.0 == True would collide otherwise).
_CACHEABLE = frozenset({int, str, bytes})


class SnapshotView(abc.ABC):
    """A consistent copy of the tables, taken synchronously, read by the upload step."""

    supports_objects = False

    @abc.abstractmethod
    def columns(self, state_id: int, key_group: int) -> Columns | None:
        """Canonical byte columns of one state in one key group."""

    def objects(self, state_id: int, key_group: int) -> dict[Any, Any] | None:
        """Stored objects ``{key: stored}`` of one state in one key group (heap only)."""
        raise TypeError(f"{type(self).__name__} has no object view")

    def release(self) -> None:  # noqa: B027 - optional hook
        """The upload is done (or failed): let the backend drop copy-on-write bookkeeping."""


class AbstractKeyedStateBackend(KeyedStateBackend):
    """Generic keyed backend over ``StateTable``s; subclasses choose the storage."""

    backend_name = "abstract"

    def __init__(self, params: KeyedStateBackendParameters) -> None:
        self.params = params
        self._range = params.key_group_range
        self.max_parallelism = params.max_parallelism
        self.key_group_assigner = params.key_group_assigner
        self.key_serializer: TypeSerializer = params.key_serializer or PickleSerializer()
        self._clock = params.clock
        self._tables: dict[str, StateTable] = {}
        self._descriptors: dict[str, StateDescriptor] = {}
        self._states: dict[str, State] = {}
        self.current_key: Any = None
        self.current_key_group: int = -1
        # key -> key group of keys seen (only keys in range are cached; bounded)
        self._kg_cache: dict[Any, int] = {}

    # -- abstract storage ----------------------------------------------------------------

    @abc.abstractmethod
    def _create_table(self, meta: RegisteredStateMeta) -> StateTable:
        """A new, empty table for ``meta``."""

    @abc.abstractmethod
    def _snapshot_view(self, metas: Sequence[RegisteredStateMeta]) -> SnapshotView:
        """Synchronous part of a full snapshot: a consistent view of the tables of ``metas``
        that stays valid while updates continue (copy-on-write, DB snapshot, ...)."""

    def _drop_tables(self) -> None:
        """Forget every table (before a restore); subclasses release storage here."""
        for table in self._tables.values():
            table.clear()
        self._tables.clear()
        self._states.clear()

    # -- KeyContext ----------------------------------------------------------------------

    def now(self) -> int:
        """Processing time in ms (TTL)."""
        return self._clock.now_ms()

    # -- KeyedStateBackend ---------------------------------------------------------------

    @property
    def key_group_range(self) -> KeyGroupRange:
        return self._range

    def set_current_key(self, key: Any) -> None:
        self.current_key_group = self.key_group_of(key)
        self.current_key = key

    def key_group_of(self, key: Any) -> int:
        """The key group of ``key``; raises ``ValueError`` when this backend does not own it."""
        cacheable = type(key) in _CACHEABLE
        if cacheable:
            kg = self._kg_cache.get(key)
            if kg is not None:
                return kg
        kg = self.key_group_assigner.key_group(key, self.max_parallelism)
        if not self._range.contains(kg):
            raise ValueError(
                f"Key group {kg} of key {key!r} is not in {self._range}. Unless you are "
                "restoring, this means the key was not routed by its key group."
            )
        if cacheable:
            if len(self._kg_cache) >= _KG_CACHE_SIZE:
                self._kg_cache.clear()
            self._kg_cache[key] = kg
        return kg

    def set_current_key_and_group(self, key: Any, key_group: int) -> None:
        """Fast path for the runtime that already computed the key group (vectorised)."""
        self.current_key = key
        self.current_key_group = key_group

    def get_current_key(self) -> Any:
        return self.current_key

    def get_partitioned_state(self, descriptor: StateDescriptor) -> Any:
        name = descriptor.get_name()
        state = self._states.get(name)
        if state is not None:
            if self._descriptors[name].kind is not descriptor.kind:
                raise ValueError(
                    f"State {name!r} was registered as {self._descriptors[name].kind.value}, "
                    f"not {descriptor.kind.value}"
                )
            return state
        meta = RegisteredStateMeta.from_descriptor(descriptor, self.key_serializer)
        table = self._tables.get(name)
        if table is None:
            table = self._create_table(meta)
            self._tables[name] = table
        elif not table.meta.same_layout(meta):
            table.meta.check_declared(meta)
            table = self._migrate(table, meta)
        self._descriptors[name] = descriptor
        state = create_state(table, self, descriptor)
        self._states[name] = state
        return state

    def _migrate(self, old: StateTable, meta: RegisteredStateMeta) -> StateTable:
        """Re-encode restored entries of ``old`` under the newly registered ``meta``."""
        if old.meta.kind is not meta.kind:
            raise RestoreError(
                f"State {meta.name!r} was restored as {old.meta.kind.value} but is now "
                f"registered as {meta.kind.value}"
            )
        if old.meta.ttl != meta.ttl:
            raise RestoreError(
                f"State {meta.name!r}: TTL was {'en' if old.meta.ttl else 'dis'}abled in the "
                "snapshot; enabling or disabling TTL on restored state is not supported"
            )
        new = self._create_table(meta)
        try:
            for kg in self._range:
                for k, uk, v in list(old.iter_entries_bytes(kg)):
                    key = old.meta.decode_key(k)
                    stored = old.meta.decode_value(v)
                    new.put_entry_bytes(
                        kg,
                        meta.encode_key(key),
                        None if uk is None else meta.encode_user_key(old.meta.decode_user_key(uk)),
                        meta.encode_value(stored),
                    )
        except (ValueError, TypeError, struct_error) as e:
            raise RestoreError(
                f"State {meta.name!r} cannot be migrated to its new serializers: {e}"
            ) from e
        old.clear()
        self._tables[meta.name] = new
        return new

    def get_keys(self, state_name: str) -> Iterable[Any]:
        table = self._tables.get(state_name)
        return [] if table is None else list(table.keys())

    def pop_map_entries(
        self, state_name: str, select: Callable[[Any], bool]
    ) -> list[tuple[int, Any, Any]]:
        """Remove every entry of MAP state ``state_name`` whose user key ``select`` accepts;
        returns ``(key group, key, user key)`` of each, key group by key group."""
        table = self._tables.get(state_name)
        if table is None:
            return []
        if table.meta.kind is not StateKind.MAP:
            raise ValueError(f"State {state_name!r} is {table.meta.kind.value}, not MAP")
        return table.pop_map_entries(self._range, select)

    def pop_due_timers(
        self, state_name: str, limits: tuple[int, int]
    ) -> tuple[list[tuple[int, int, Any, int]], list[int | None]]:
        """Remove every timer of the timers MAP state ``state_name`` (user keys ``(domain,
        timestamp)``) at or before ``limits[domain]``; returns ``(timestamp, domain, key,
        key group)`` of each, key group by key group, and the earliest timestamp left per
        domain (``None``: none)."""
        table = self._tables.get(state_name)
        pop_due = getattr(table, "pop_due", None)
        if pop_due is not None:
            return pop_due(self._range, limits)  # type: ignore[no-any-return]
        earliest: list[int | None] = [None, None]

        def is_due(user_key: tuple[int, int]) -> bool:
            domain, ts = user_key
            if ts <= limits[domain]:
                return True
            first = earliest[domain]
            if first is None or ts < first:
                earliest[domain] = ts
            return False

        popped = self.pop_map_entries(state_name, is_due)
        return [(uk[1], uk[0], key, kg) for kg, key, uk in popped], earliest

    def registered_state_names(self) -> list[str]:
        """Names of every state with a table (registered or restored)."""
        return list(self._tables)

    # -- snapshots -----------------------------------------------------------------------

    def snapshot(
        self,
        checkpoint_id: int,
        stream_factory: CheckpointStreamFactory,
        snapshot_type: str = SnapshotType.CHECKPOINT,
    ) -> Callable[[], KeyedStateHandle | None]:
        if snapshot_type == SnapshotType.FULL_CHECKPOINT:
            snapshot_type = SnapshotType.CHECKPOINT  # a full snapshot shares no file anyway
        return self.full_snapshot(checkpoint_id, stream_factory, snapshot_type)

    def full_snapshot(
        self,
        checkpoint_id: int,
        stream_factory: CheckpointStreamFactory,
        snapshot_type: str = SnapshotType.CHECKPOINT,
    ) -> Callable[[], KeyedStateHandle | None]:
        """A full (key-groups) snapshot: consistent view now, upload when called."""
        metas = tuple(t.meta for t in self._tables.values())
        header = SnapshotHeader(
            self.max_parallelism, self._range, metas, snapshot_type, self.backend_name
        )
        if not metas:
            return lambda: None
        view = self._snapshot_view(metas)
        cleanups = self._full_snapshot_ttl_cleanups(metas)
        now = self.now()
        use_objects = view.supports_objects and snapshot_type == SnapshotType.CHECKPOINT
        header = dataclasses.replace(header, block_encoding="pickle" if use_objects else "arrow")
        n = len(metas)

        def columns_of(state_id: int, kg: int) -> Columns | None:
            cols = view.columns(state_id, kg)
            ttl = cleanups[state_id]
            if cols is None or ttl is None:
                return cols
            return _drop_expired(metas[state_id], cols, now, ttl)

        def objects_of(state_id: int, kg: int) -> dict[Any, Any] | None:
            objs = view.objects(state_id, kg)
            ttl = cleanups[state_id]
            if not objs or ttl is None:
                return objs
            return _drop_expired_objects(metas[state_id], objs, now, ttl)

        def block_of(kg: int) -> bytes | memoryview | None:
            if use_objects:
                return pickle_block(n, objects_of, kg)
            return arrow_block(n, columns_of, kg)

        def upload() -> KeyedStateHandle | None:
            try:
                out = stream_factory.create_checkpoint_state_output_stream()
                return write_key_groups_snapshot(out, header, block_of)
            finally:
                view.release()

        return upload

    def _full_snapshot_ttl_cleanups(self, metas: Sequence[RegisteredStateMeta]) -> list[int | None]:
        """Per state, the TTL in ms when expired entries are dropped from full snapshots."""
        out: list[int | None] = []
        for meta in metas:
            desc = self._descriptors.get(meta.name)
            cfg = None if desc is None else desc.get_ttl_config()
            if meta.ttl and cfg is not None and cfg.get_cleanup_strategies().in_full_snapshot():
                out.append(cfg.get_ttl_millis())
            else:
                out.append(None)
        return out

    # -- restore -------------------------------------------------------------------------

    def restore(self, handles: Sequence[KeyedStateHandle]) -> None:
        self._drop_tables()
        key_groups = [h for h in handles if isinstance(h, KeyGroupsStateHandle)]
        others = [h for h in handles if not isinstance(h, KeyGroupsStateHandle)]
        if others:
            self._restore_other(others)
        restore_key_groups(
            key_groups,
            self._range,
            self.max_parallelism,
            self._table_for_restore,
            self._pickle_block_sink(),
        )

    def _pickle_block_sink(self) -> PickleBlockSink | None:
        """Where undecoded ``pickle`` blocks go on restore (``None``: decode them now)."""
        return None

    def _restore_other(self, handles: Sequence[KeyedStateHandle]) -> None:
        """Restore handle types other than key-groups handles (RocksDB incremental)."""
        kinds = sorted({type(h).__name__ for h in handles})
        raise RestoreError(
            f"{type(self).__name__} cannot restore state handles of type {', '.join(kinds)}"
        )

    def _table_for_restore(self, meta: RegisteredStateMeta) -> StateTable:
        """The table restored entries of ``meta`` go into (created on first use)."""
        table = self._tables.get(meta.name)
        if table is None:
            table = self._create_table(meta)
            self._tables[meta.name] = table
        else:
            table.meta.check_restored_layout(meta)
        return table


def _drop_expired(meta: RegisteredStateMeta, cols: Columns, now: int, ttl: int) -> Columns:
    keys, uks, vals = cols
    out_k: list[bytes] = []
    out_uk: list[bytes] | None = None if uks is None else []
    out_v: list[bytes] = []
    for i, v in enumerate(vals):
        kept = meta.drop_expired_bytes(v, now, ttl)
        if kept is None:
            continue
        out_k.append(keys[i])
        if out_uk is not None and uks is not None:
            out_uk.append(uks[i])
        out_v.append(kept)
    return out_k, out_uk, out_v


def _drop_expired_objects(
    meta: RegisteredStateMeta, objs: dict[Any, Any], now: int, ttl: int
) -> dict[Any, Any]:
    """``objs`` without expired values, list elements or map entries."""
    out: dict[Any, Any] = {}
    for key, stored in objs.items():
        if meta.kind is StateKind.MAP:
            alive = {uk: v for uk, v in stored.items() if v.timestamp + ttl > now}
            if alive:
                out[key] = alive
        elif meta.kind is StateKind.LIST:
            elems = [e for e in stored if e.timestamp + ttl > now]
            if elems:
                out[key] = elems
        elif stored.timestamp + ttl > now:
            out[key] = stored
    return out
