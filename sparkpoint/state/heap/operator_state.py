"""Operator (non-keyed) state on the heap: split/union list state and broadcast state.

Not used by the runtime yet: only keyed state and source positions are checkpointed (the
broadcast-state work wires it in). Snapshot stream layout::

    b"SPOP" uint16 version (=1) uint32 n, n bytes JSON {name: {"mode", "serializer"}}
    then the entries of every state, each ``uint32 length + bytes`` at an offset the handle
    records (per state, in order). Broadcast entries are (key, value) pairs.

The handle lists one offset per entry, so ``state.operator_repartition`` re-splits list state
on rescaling without reading any byte.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sparkpoint.checkpoint.handles import (
    OperatorStateDistributionMode,
    OperatorStateHandle,
    StateMetaInfo,
)
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.errors import RestoreError
from sparkpoint.state.backend import OperatorStateBackend
from sparkpoint.state.descriptors import ListStateDescriptor, MapStateDescriptor
from sparkpoint.state.serializers import (
    PickleSerializer,
    TupleSerializer,
    TypeSerializer,
    serializer_from_config,
)

__all__ = [
    "BroadcastState",
    "DefaultOperatorStateBackend",
    "OperatorListState",
]

Mode = OperatorStateDistributionMode
_Restored = tuple[OperatorStateDistributionMode, TypeSerializer, list[Any]]
_MAGIC = b"SPOP"
_VERSION = 1
_HEAD = struct.Struct(">4sHI")
_LEN = struct.Struct(">I")


class OperatorListState:
    """A list of elements of one subtask (split or union distribution on restore)."""

    def __init__(self, name: str, mode: OperatorStateDistributionMode,
                 serializer: TypeSerializer) -> None:
        self.name = name
        self.mode = mode
        self.serializer = serializer
        self._elements: list[Any] = []

    def get(self) -> Iterable[Any]:
        """The elements (a copy)."""
        return list(self._elements)

    def add(self, value: Any) -> None:
        """Append one element."""
        if value is None:
            raise ValueError("You cannot add null to a ListState.")
        self._elements.append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        """Append elements."""
        for v in values:
            self.add(v)

    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements."""
        self._elements = []
        self.add_all(values)

    def clear(self) -> None:
        """Remove every element."""
        self._elements = []

    def _entries(self) -> Iterator[Any]:
        return iter(self._elements)

    def _restore(self, value: Any) -> None:
        self._elements.append(value)


class BroadcastState:
    """A map that is identical on every subtask (broadcast distribution)."""

    mode = Mode.BROADCAST

    def __init__(self, name: str, serializer: TypeSerializer) -> None:
        self.name = name
        self.serializer = serializer
        self._map: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        """The value of ``key`` (``None`` if absent)."""
        return self._map.get(key)

    def put(self, key: Any, value: Any) -> None:
        """Set ``key``."""
        self._map[key] = value

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        """Set every entry."""
        self._map.update(dict_value)

    def remove(self, key: Any) -> None:
        """Remove ``key``."""
        self._map.pop(key, None)

    def contains(self, key: Any) -> bool:
        """Whether ``key`` is present."""
        return key in self._map

    def items(self) -> Iterable[tuple[Any, Any]]:
        """All entries."""
        return list(self._map.items())

    def keys(self) -> Iterable[Any]:
        """All keys."""
        return list(self._map)

    def values(self) -> Iterable[Any]:
        """All values."""
        return list(self._map.values())

    def is_empty(self) -> bool:
        """Whether the map is empty."""
        return not self._map

    def clear(self) -> None:
        """Remove every entry."""
        self._map.clear()

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._map))

    def _entries(self) -> Iterator[Any]:
        return iter(self._map.items())

    def _restore(self, entry: Any) -> None:
        key, value = entry
        self._map[key] = value


def _name_and_serializer(
    name_or_descriptor: Any, broadcast: bool
) -> tuple[str, TypeSerializer]:
    if isinstance(name_or_descriptor, str):
        return name_or_descriptor, (
            TupleSerializer([PickleSerializer(), PickleSerializer()]) if broadcast
            else PickleSerializer())
    if broadcast and isinstance(name_or_descriptor, MapStateDescriptor):
        return name_or_descriptor.get_name(), TupleSerializer([
            name_or_descriptor.key_type_info.get_serializer(),
            name_or_descriptor.value_type_info.get_serializer()])
    if not broadcast and isinstance(name_or_descriptor, ListStateDescriptor):
        return name_or_descriptor.get_name(), name_or_descriptor.elem_type_info.get_serializer()
    want = "a MapStateDescriptor" if broadcast else "a ListStateDescriptor"
    raise TypeError(f"Expected a state name or {want}, got {type(name_or_descriptor).__name__}")


class DefaultOperatorStateBackend(OperatorStateBackend):
    """Operator state of one subtask, held on the heap and written synchronously."""

    def __init__(self, restore_from: Sequence[OperatorStateHandle] = ()) -> None:
        self._states: dict[str, OperatorListState | BroadcastState] = {}
        self._restored: dict[str, _Restored] = {}
        for handle in restore_from:
            self._read_handle(handle)

    def _read_handle(self, handle: OperatorStateHandle) -> None:
        try:
            stream = handle.delegate.open_input_stream()
        except FileNotFoundError as e:
            raise RestoreError(f"Operator state file is missing: {e}") from e
        with stream:
            head = stream.read(_HEAD.size)
            if len(head) != _HEAD.size:
                raise RestoreError("Truncated operator state header")
            magic, version, n = _HEAD.unpack(head)
            if magic != _MAGIC or version != _VERSION:
                raise RestoreError(f"Not a sparkpoint operator state stream (magic {magic!r}, "
                                   f"version {version})")
            infos = json.loads(stream.read(n))
            for name, meta in handle.state_name_to_partition_offsets.items():
                if name not in infos:
                    raise RestoreError(f"Operator state {name!r} is not in its stream")
                serializer = serializer_from_config(infos[name]["serializer"])
                mode = Mode(infos[name]["mode"])
                _, _, values = self._restored.setdefault(name, (mode, serializer, []))
                if mode is Mode.BROADCAST and values:
                    continue  # identical copies: keep the first
                for offset in meta.offsets:
                    stream.seek(offset)
                    (length,) = _LEN.unpack(stream.read(_LEN.size))
                    values.append(serializer.deserialize(stream.read(length)))

    def _get(self, name_or_descriptor: Any, mode: OperatorStateDistributionMode) -> Any:
        broadcast = mode is Mode.BROADCAST
        name, serializer = _name_and_serializer(name_or_descriptor, broadcast)
        state = self._states.get(name)
        if state is not None:
            if state.mode is not mode:
                raise ValueError(f"Operator state {name!r} was registered as "
                                 f"{state.mode.name}, not {mode.name}")
            return state
        state = BroadcastState(name, serializer) if broadcast else OperatorListState(
            name, mode, serializer)
        restored = self._restored.pop(name, None)
        if restored is not None:
            if restored[0] is not mode:
                raise RestoreError(f"Operator state {name!r} was written as {restored[0].name} "
                                   f"but is now requested as {mode.name}")
            for value in restored[2]:
                state._restore(value)
        self._states[name] = state
        return state

    def get_list_state(self, name: Any) -> OperatorListState:
        return self._get(name, Mode.SPLIT_DISTRIBUTE)  # type: ignore[no-any-return]

    def get_union_list_state(self, name: Any) -> OperatorListState:
        return self._get(name, Mode.UNION)  # type: ignore[no-any-return]

    def get_broadcast_state(self, name: Any) -> BroadcastState:
        return self._get(name, Mode.BROADCAST)  # type: ignore[no-any-return]

    def get_registered_state_names(self) -> list[str]:
        """Names of the registered states."""
        return list(self._states)

    def snapshot(self, stream_factory: CheckpointStreamFactory) -> OperatorStateHandle | None:
        states = [s for s in self._states.values() if not _is_empty(s)]
        # State restored but never re-registered is carried over, as Flink does.
        carried = {n: r for n, r in self._restored.items() if r[2]}
        if not states and not carried:
            return None
        infos = {s.name: {"mode": int(s.mode), "serializer": s.serializer.snapshot_config()}
                 for s in states}
        infos.update({n: {"mode": int(r[0]), "serializer": r[1].snapshot_config()}
                      for n, r in carried.items()})
        body = json.dumps(infos).encode("utf-8")
        out = stream_factory.create_checkpoint_state_output_stream()
        try:
            out.write(_HEAD.pack(_MAGIC, _VERSION, len(body)) + body)
            offsets: dict[str, StateMetaInfo] = {}
            entries: list[tuple[str, Mode, TypeSerializer, Iterable[Any]]] = [
                (s.name, s.mode, s.serializer, s._entries()) for s in states]
            entries += [(n, r[0], r[1], r[2]) for n, r in carried.items()]
            for name, mode, serializer, values in entries:
                positions = []
                for value in values:
                    positions.append(out.tell())
                    data = serializer.serialize(value)
                    out.write(_LEN.pack(len(data)) + data)
                offsets[name] = StateMetaInfo(tuple(positions), mode)
            delegate = out.close_and_get_handle()
        except BaseException:
            out.close()
            raise
        if delegate is None:
            return None
        return OperatorStateHandle(offsets, delegate)


def _is_empty(state: OperatorListState | BroadcastState) -> bool:
    if isinstance(state, BroadcastState):
        return state.is_empty()
    return not state._elements
