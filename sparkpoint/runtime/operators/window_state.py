"""Keyed state scoped to a window: Flink's state namespaces, on backends that have none.

Each windowed state is one keyed ``MapState`` from window to value, so window contents,
trigger state and per-window function state are ordinary keyed state: checkpointed,
restored and rescaled with their key groups. A ``WindowedState`` reads and writes the entry
of the current key and of ``scope.window``; its methods are those of the state kind of the
descriptor it was made for (value, list, map, reducing, aggregating).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.state.descriptors import MapStateDescriptor, StateDescriptor, StateKind
from sparkpoint.state.primitives import MapSyntax
from sparkpoint.state.typeinfo import Types

__all__ = ["WindowScope", "WindowedState", "windowed_state"]


class WindowScope:
    """The window that windowed states currently address (set by the window operator)."""

    def __init__(self) -> None:
        self.window: Any = None


class WindowedState(MapSyntax):
    """A state of one kind, per key and window, stored as ``window -> value`` in a map."""

    def __init__(self, backend: Any, name: str, desc: StateDescriptor, scope: WindowScope) -> None:
        self._map = backend.get_partitioned_state(
            MapStateDescriptor(name, Types.PICKLED_BYTE_ARRAY(), Types.PICKLED_BYTE_ARRAY())
        )
        self._desc = desc
        self._kind = desc.kind
        self._scope = scope

    # -- shared -----------------------------------------------------------------------------
    def _get(self) -> Any:
        return self._map.get(self._scope.window)

    def _put(self, value: Any) -> None:
        if value is None:
            self._map.remove(self._scope.window)
        else:
            self._map.put(self._scope.window, value)

    def clear(self) -> None:
        self._map.remove(self._scope.window)

    def raw(self) -> Any:
        """The stored value of the current window (list, accumulator, value), or None."""
        return self._get()

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Merge the sources' entries into ``target`` and remove them.

        Lists are concatenated (target first). Reducing and aggregating states keep the
        first value present among target and sources, as PyFlink 2.3 does (its merged
        state reads the first of the values the Java side collected): see docs/windows.md.
        """
        if self._kind not in (StateKind.LIST, StateKind.REDUCING, StateKind.AGGREGATING):
            raise TypeError(
                f"State {self._desc.get_name()!r} ({self._kind.value}) cannot be merged: "
                "only list, reducing and aggregating states can"
            )
        merged = self._map.get(target)
        for source in sources:
            if source == target:
                continue
            value = self._map.get(source)
            if value is None:
                continue
            self._map.remove(source)
            if merged is None:
                merged = value
            elif self._kind is StateKind.LIST:
                merged = merged + value
        if merged is not None:
            self._map.put(target, merged)

    # -- ValueState ---------------------------------------------------------------------------
    def value(self) -> Any:
        return self._get()

    def update(self, value: Any) -> None:
        if self._kind is StateKind.LIST:
            values = list(value) if value is not None else []
            self._put(values or None)
        else:
            self._put(value)

    # -- ListState / ReducingState / AggregatingState -------------------------------------------
    def get(self, key: Any = None) -> Any:
        kind = self._kind
        stored = self._get()
        if kind is StateKind.MAP:
            return None if stored is None else stored.get(key)
        if kind is StateKind.LIST:
            return [] if stored is None else list(stored)
        if kind is StateKind.AGGREGATING:
            if stored is None:
                return None
            return self._desc.get_agg_function().get_result(stored)  # type: ignore[attr-defined]
        return stored

    def add(self, value: Any) -> None:
        kind = self._kind
        stored = self._get()
        if kind is StateKind.LIST:
            self._put([value] if stored is None else [*stored, value])
        elif kind is StateKind.REDUCING:
            if stored is not None:
                value = self._desc.get_reduce_function().reduce(stored, value)  # type: ignore[attr-defined]
            self._put(value)
        elif kind is StateKind.AGGREGATING:
            agg = self._desc.get_agg_function()  # type: ignore[attr-defined]
            acc = agg.create_accumulator() if stored is None else stored
            self._put(agg.add(value, acc))
        else:
            raise TypeError(f"add() is not defined for {self._kind.value} state")

    def add_all(self, values: Iterable[Any]) -> None:
        stored = self._get() or []
        self._put([*stored, *values] or None)

    # -- MapState -------------------------------------------------------------------------------
    def _dict(self) -> dict[Any, Any]:
        return self._get() or {}

    def put(self, key: Any, value: Any) -> None:
        d = dict(self._dict())
        d[key] = value
        self._put(d)

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        self._put({**self._dict(), **dict_value} or None)

    def remove(self, key: Any) -> None:
        d = dict(self._dict())
        d.pop(key, None)
        self._put(d or None)

    def contains(self, key: Any) -> bool:
        return key in self._dict()

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._dict().items())

    def keys(self) -> Iterable[Any]:
        return list(self._dict())

    def values(self) -> Iterable[Any]:
        return list(self._dict().values())

    def is_empty(self) -> bool:
        return not self._dict()


def windowed_state(
    cache: dict[str, WindowedState],
    backend: Any,
    prefix: str,
    desc: StateDescriptor,
    scope: WindowScope,
) -> WindowedState:
    """The windowed state for ``desc`` under ``prefix`` (one object per name)."""
    name = prefix + desc.get_name()
    state = cache.get(name)
    if state is None:
        state = cache[name] = WindowedState(backend, name, desc, scope)
    elif state._kind is not desc.kind:
        raise ValueError(
            f"State {desc.get_name()!r} was registered as {state._kind.value}, "
            f"not {desc.kind.value}"
        )
    return state
