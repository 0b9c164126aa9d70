"""The keyed state objects, written once over ``StateTable`` so every backend behaves alike.

TTL (value + last-access timestamp) lives here: expired entries are never returned under
``NeverReturnExpired`` (and are removed when met), timestamps refresh on create/write or also
on read, per the descriptor's ``StateTtlConfig``. List elements and map entries expire one by
one, as in Flink.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from sparkpoint.state.descriptors import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
)
from sparkpoint.state.table import MISSING, StateTable, TtlValue
from sparkpoint.state.ttl import StateTtlConfig

__all__ = [
    "AggregatingState",
    "KeyContext",
    "ListState",
    "MapState",
    "ReducingState",
    "State",
    "ValueState",
    "create_state",
]


class KeyContext(Protocol):
    """What state objects need from their backend: the current key and the clock."""

    current_key: Any
    current_key_group: int

    def now(self) -> int:
        """Current processing time in milliseconds (TTL)."""
        ...


class _Ttl:
    """TTL decisions for one state (absent when TTL is off)."""

    __slots__ = ("_cleanup", "_cleanup_size", "_ctx", "millis", "return_expired", "update_on_read")

    def __init__(self, config: StateTtlConfig, ctx: KeyContext, table: StateTable) -> None:
        self.millis = config.get_ttl_millis()
        self.update_on_read = config.get_update_type() == StateTtlConfig.UpdateType.OnReadAndWrite
        self.return_expired = (
            config.get_state_visibility()
            == StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
        )
        self._ctx = ctx
        incremental = config.get_cleanup_strategies().get_incremental_cleanup_strategy()
        self._cleanup = getattr(table, "cleanup_expired_step", None) if incremental else None
        self._cleanup_size = incremental.get_cleanup_size() if incremental else 0

    def now(self) -> int:
        """The current time; also runs one incremental cleanup step where configured (it
        skips the current key, whose access applies the visibility rules itself)."""
        t = self._ctx.now()
        if self._cleanup is not None:
            self._cleanup(self._cleanup_size, t, self.millis, self._ctx.current_key)
        return t

    def expired(self, stored: TtlValue, now: int) -> bool:
        return stored.timestamp + self.millis <= now


class State:
    """Base of keyed state objects: bound to a table and the backend's current key."""

    def __init__(self, table: StateTable, ctx: KeyContext, desc: StateDescriptor) -> None:
        self._table = table
        self._ctx = ctx
        self._desc = desc
        cfg = desc.get_ttl_config()
        self._ttl = _Ttl(cfg, ctx, table) if cfg is not None and cfg.is_enabled() else None

    def clear(self) -> None:
        """Remove the value of the current key."""
        ctx = self._ctx
        self._table.delete(ctx.current_key_group, ctx.current_key)

    # single stored value with TTL handling (VALUE, REDUCING, AGGREGATING)
    def _get_single(self) -> Any:
        ctx = self._ctx
        ttl = self._ttl
        now = 0 if ttl is None else ttl.now()
        stored = self._table.get(ctx.current_key_group, ctx.current_key)
        if ttl is None or stored is None:
            return stored
        if ttl.expired(stored, now):
            self._table.delete(ctx.current_key_group, ctx.current_key)
            return stored.value if ttl.return_expired else None
        if ttl.update_on_read:
            self._table.put(ctx.current_key_group, ctx.current_key, TtlValue(stored.value, now))
        return stored.value

    def _put_single(self, value: Any) -> None:
        ctx = self._ctx
        stored = value if self._ttl is None else TtlValue(value, self._ttl.now())
        self._table.put(ctx.current_key_group, ctx.current_key, stored)


class ValueState(State):
    """One value per key: ``value()``, ``update(v)``, ``clear()``."""

    def __init__(self, table: StateTable, ctx: KeyContext, desc: StateDescriptor) -> None:
        super().__init__(table, ctx, desc)
        accessors = getattr(table, "value_accessors", None)
        if self._ttl is None and accessors is not None:
            # the table's specialised closures replace the generic methods (hot path)
            self.__dict__["value"], self.__dict__["update"] = accessors(ctx)

    def value(self) -> Any:
        """The value of the current key, or ``None``."""
        if self._ttl is None:
            ctx = self._ctx
            return self._table.get(ctx.current_key_group, ctx.current_key)
        return self._get_single()

    def update(self, value: Any) -> None:
        """Set the value of the current key (``None`` clears it, as in Flink)."""
        if value is None:
            self.clear()
            return
        if self._ttl is None:
            ctx = self._ctx
            self._table.put(ctx.current_key_group, ctx.current_key, value)
            return
        self._put_single(value)


class ListState(State):
    """A list per key: ``get()``, ``add(v)``, ``add_all(vs)``, ``update(vs)``, ``clear()``."""

    def get(self) -> Iterable[Any]:
        """The elements of the current key (an empty list if none)."""
        ctx = self._ctx
        ttl = self._ttl
        now = 0 if ttl is None else ttl.now()
        stored = self._table.get(ctx.current_key_group, ctx.current_key)
        if not stored:
            return []
        if ttl is None:
            return list(stored)
        alive = [e for e in stored if not ttl.expired(e, now)]
        result = [e.value for e in (stored if ttl.return_expired else alive)]
        if len(alive) != len(stored) or (ttl.update_on_read and alive):
            refreshed = [TtlValue(e.value, now) for e in alive] if ttl.update_on_read else alive
            if refreshed:
                self._table.put(ctx.current_key_group, ctx.current_key, refreshed)
            else:
                self._table.delete(ctx.current_key_group, ctx.current_key)
        return result

    def _wrap(self, values: Iterable[Any]) -> list[Any]:
        items = list(values)
        if any(v is None for v in items):
            raise ValueError("You cannot add null to a ListState.")
        if self._ttl is None:
            return items
        now = self._ttl.now()
        return [TtlValue(v, now) for v in items]

    def add(self, value: Any) -> None:
        """Append one element."""
        ctx = self._ctx
        self._table.append(ctx.current_key_group, ctx.current_key, self._wrap((value,)))

    def add_all(self, values: Iterable[Any]) -> None:
        """Append elements."""
        items = self._wrap(values)
        if items:
            ctx = self._ctx
            self._table.append(ctx.current_key_group, ctx.current_key, items)

    def update(self, values: Iterable[Any]) -> None:
        """Replace the list (an empty one clears it)."""
        items = self._wrap(values)
        ctx = self._ctx
        if items:
            self._table.put(ctx.current_key_group, ctx.current_key, items)
        else:
            self._table.delete(ctx.current_key_group, ctx.current_key)


class MapMethods(Protocol):
    """The PyFlink methods of a map state that ``MapSyntax`` builds on."""

    def keys(self) -> Iterable[Any]: ...
    def contains(self, key: Any) -> bool: ...
    def get(self, key: Any) -> Any: ...
    def put(self, key: Any, value: Any) -> None: ...
    def remove(self, key: Any) -> None: ...


class MapSyntax:
    """``in``, ``[]``, ``del`` and iteration for a map state, from its PyFlink methods."""

    def __iter__(self: MapMethods) -> Iterator[Any]:
        return iter(self.keys())

    def __contains__(self: MapMethods, key: Any) -> bool:
        return self.contains(key)

    def __getitem__(self: MapMethods, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self: MapMethods, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self: MapMethods, key: Any) -> None:
        self.remove(key)


class MapState(MapSyntax, State):
    """A map per key with PyFlink's methods; iterating yields the user keys."""

    def _read(self, user_key: Any, now: int | None) -> Any:
        ctx = self._ctx
        stored = self._table.map_get(ctx.current_key_group, ctx.current_key, user_key)
        ttl = self._ttl
        if ttl is None or stored is MISSING:
            return stored
        assert now is not None
        if ttl.expired(stored, now):
            self._table.map_remove(ctx.current_key_group, ctx.current_key, user_key)
            return stored.value if ttl.return_expired else MISSING
        if ttl.update_on_read:
            self._table.map_put(
                ctx.current_key_group, ctx.current_key, user_key, TtlValue(stored.value, now)
            )
        return stored.value

    def _now(self) -> int | None:
        return None if self._ttl is None else self._ttl.now()

    def get(self, key: Any) -> Any:
        """The value of ``key`` (``None`` if absent)."""
        value = self._read(key, self._now())
        return None if value is MISSING else value

    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value``."""
        ctx = self._ctx
        stored = value if self._ttl is None else TtlValue(value, self._ttl.now())
        self._table.map_put(ctx.current_key_group, ctx.current_key, key, stored)

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        """Set every entry of ``dict_value``."""
        for k, v in dict_value.items():
            self.put(k, v)

    def remove(self, key: Any) -> None:
        """Remove ``key``."""
        ctx = self._ctx
        self._table.map_remove(ctx.current_key_group, ctx.current_key, key)

    def contains(self, key: Any) -> bool:
        """Whether ``key`` has a (non-expired) entry."""
        return self._read(key, self._now()) is not MISSING

    def _live_entries(self) -> list[tuple[Any, Any]]:
        ctx = self._ctx
        entries = self._table.map_entries(ctx.current_key_group, ctx.current_key)
        ttl = self._ttl
        if ttl is None:
            return entries
        now = ttl.now()
        out = []
        for uk, stored in entries:
            if ttl.expired(stored, now):
                self._table.map_remove(ctx.current_key_group, ctx.current_key, uk)
                if not ttl.return_expired:
                    continue
            elif ttl.update_on_read:
                self._table.map_put(
                    ctx.current_key_group, ctx.current_key, uk, TtlValue(stored.value, now)
                )
            out.append((uk, stored.value))
        return out

    def items(self) -> Iterable[tuple[Any, Any]]:
        """All ``(key, value)`` entries."""
        return self._live_entries()

    def keys(self) -> Iterable[Any]:
        """All keys."""
        return [k for k, _ in self._live_entries()]

    def values(self) -> Iterable[Any]:
        """All values."""
        return [v for _, v in self._live_entries()]

    def is_empty(self) -> bool:
        """Whether the map of the current key has no (non-expired) entry."""
        if self._ttl is None:
            ctx = self._ctx
            return self._table.map_is_empty(ctx.current_key_group, ctx.current_key)
        return not self._live_entries()


class ReducingState(State):
    """A value that ``add`` combines with the descriptor's reduce function."""

    def __init__(self, table: StateTable, ctx: KeyContext, desc: StateDescriptor) -> None:
        super().__init__(table, ctx, desc)
        assert isinstance(desc, ReducingStateDescriptor)
        self._reduce = desc.get_reduce_function().reduce

    def get(self) -> Any:
        """The reduced value (``None`` if nothing was added)."""
        return self._get_single()

    def add(self, value: Any) -> None:
        """Reduce ``value`` into the state."""
        if value is None:
            raise ValueError("You cannot add null to a ReducingState.")
        current = self._get_single()
        self._put_single(value if current is None else self._reduce(current, value))


class AggregatingState(State):
    """An accumulator fed through the descriptor's AggregateFunction."""

    def __init__(self, table: StateTable, ctx: KeyContext, desc: StateDescriptor) -> None:
        super().__init__(table, ctx, desc)
        assert isinstance(desc, AggregatingStateDescriptor)
        self._agg = desc.get_agg_function()

    def get(self) -> Any:
        """The aggregate result (``None`` if nothing was added)."""
        acc = self._get_single()
        return None if acc is None else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        """Add ``value`` to the accumulator."""
        acc = self._get_single()
        if acc is None:
            acc = self._agg.create_accumulator()
        self._put_single(self._agg.add(value, acc))


_BY_KIND: dict[StateKind, type[State]] = {
    StateKind.VALUE: ValueState,
    StateKind.LIST: ListState,
    StateKind.MAP: MapState,
    StateKind.REDUCING: ReducingState,
    StateKind.AGGREGATING: AggregatingState,
}


def create_state(table: StateTable, ctx: KeyContext, desc: StateDescriptor) -> State:
    """The state object of ``desc``'s kind over ``table``."""
    return _BY_KIND[desc.kind](table, ctx, desc)
