"""Operator (non-keyed) state on the heap: the broadcast state of broadcast operators.

Every subtask of a broadcast operator holds the same maps (``MapStateDescriptor``s); the
runtime carries them between epochs and into checkpoints (``runtime/task/carried_state.py``).
Operator list and union state (Flink's ``CheckpointedFunction``) have no PyFlink user and
are not kept. Snapshot stream layout::

    b"SPOP" uint16 version (=1) uint32 n, n bytes JSON {name: {"mode", "serializer"}}
    then the entries of every state, each ``uint32 length + bytes`` at an offset the handle
    records (per state, in order); an entry is a (key, value) pair.

The handle lists one offset per entry (``state.operator_repartition`` assigns copies on
rescaling without reading any byte).
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
    describe_stream,
)
from sparkpoint.checkpoint.json_nesting import check_json_nesting
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.errors import CorruptStateError, RestoreError
from sparkpoint.state.backend import OperatorStateBackend
from sparkpoint.state.descriptors import MapStateDescriptor
from sparkpoint.state.serializers import (
    TupleSerializer,
    TypeSerializer,
    serializer_from_config,
)

__all__ = [
    "BroadcastState",
    "DefaultOperatorStateBackend",
    "ReadOnlyBroadcastState",
]

Mode = OperatorStateDistributionMode
_MAGIC = b"SPOP"
_VERSION = 1
_HEAD = struct.Struct(">4sHI")
_LEN = struct.Struct(">I")


class ReadOnlyBroadcastState:
    """A read-only view of a ``BroadcastState`` (what the non-broadcast side of a broadcast
    operator sees). Values are not copied: do not modify what ``get`` or ``items`` return."""

    def __init__(
        self, name: str, serializer: TypeSerializer, entries: dict[Any, Any] | None = None
    ) -> None:
        self.name = name
        self.serializer = serializer
        self._map: dict[Any, Any] = {} if entries is None else entries

    def get(self, key: Any) -> Any:
        """The value of ``key`` (``None`` if absent)."""
        return self._map.get(key)

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

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._map))


class BroadcastState(ReadOnlyBroadcastState):
    """A map that is identical on every subtask (broadcast distribution)."""

    def read_only(self) -> ReadOnlyBroadcastState:
        """A read-only view sharing this state's entries."""
        return ReadOnlyBroadcastState(self.name, self.serializer, self._map)

    def put(self, key: Any, value: Any) -> None:
        """Set ``key``."""
        self._map[key] = value

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        """Set every entry."""
        self._map.update(dict_value)

    def remove(self, key: Any) -> None:
        """Remove ``key``."""
        self._map.pop(key, None)

    def clear(self) -> None:
        """Remove every entry."""
        self._map.clear()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def _entries(self) -> Iterator[Any]:
        return iter(self._map.items())

    def _restore(self, entry: Any) -> None:
        key, value = entry
        self._map[key] = value


class DefaultOperatorStateBackend(OperatorStateBackend):
    """The broadcast states of one subtask, held on the heap and written synchronously."""

    def __init__(self, restore_from: Sequence[OperatorStateHandle] = ()) -> None:
        self._states: dict[str, BroadcastState] = {}
        # name -> (serializer, entries) read from the handles, until the state is registered
        self._restored: dict[str, tuple[TypeSerializer, list[Any]]] = {}
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
                raise RestoreError(
                    f"Not a sparkpoint operator state stream (magic {magic!r}, version {version})"
                )
            where = describe_stream(handle.delegate)
            size = handle.delegate.state_size
            if n > size - _HEAD.size:
                raise CorruptStateError(
                    f"Corrupt operator state in {where}: its header declares {n} bytes of "
                    f"JSON, but the stream holds {size} bytes"
                )
            try:
                text = stream.read(n)
                check_json_nesting(text)
                infos = json.loads(text)
                self._read_states(handle, stream, infos)
            except (KeyError, TypeError, ValueError, IndexError, struct.error) as e:
                raise CorruptStateError(f"Corrupt operator state in {where}: {e!r}") from None

    def _read_states(self, handle: OperatorStateHandle, stream: Any, infos: Any) -> None:
        for name, meta in handle.state_name_to_partition_offsets.items():
            if name not in infos:
                raise RestoreError(f"Operator state {name!r} is not in its stream")
            mode = Mode(infos[name]["mode"])
            if mode is not Mode.BROADCAST or meta.distribution_mode is not Mode.BROADCAST:
                raise RestoreError(
                    f"Operator state {name!r} is {mode.name} state; sparkpoint keeps "
                    "only broadcast state"
                )
            if name in self._restored:
                continue  # identical copies: keep the first
            serializer = serializer_from_config(infos[name]["serializer"])
            entries = []
            for offset in meta.offsets:
                stream.seek(offset)
                (length,) = _LEN.unpack(stream.read(_LEN.size))
                if length > handle.delegate.state_size - offset:
                    raise ValueError(f"an entry of {length} bytes past the stream's end")
                entries.append(serializer.deserialize(stream.read(length)))
            self._restored[name] = (serializer, entries)

    def get_broadcast_state(self, name: Any) -> BroadcastState:
        """The broadcast state of a ``MapStateDescriptor`` (registered on first use, with
        what was restored for its name)."""
        if not isinstance(name, MapStateDescriptor):
            raise TypeError(
                f"Broadcast state needs a MapStateDescriptor, got {type(name).__name__}"
            )
        state = self._states.get(name.get_name())
        if state is not None:
            return state
        serializer = TupleSerializer(
            [name.key_type_info.get_serializer(), name.value_type_info.get_serializer()]
        )
        state = BroadcastState(name.get_name(), serializer)
        restored = self._restored.pop(name.get_name(), None)
        if restored is not None:
            for entry in restored[1]:
                state._restore(entry)
        self._states[state.name] = state
        return state

    def snapshot(self, stream_factory: CheckpointStreamFactory) -> OperatorStateHandle | None:
        states: list[tuple[str, TypeSerializer, Iterable[Any]]] = [
            (s.name, s.serializer, s._entries()) for s in self._states.values() if not s.is_empty()
        ]
        # State restored but never re-registered is carried over, as Flink does.
        states += [(n, ser, entries) for n, (ser, entries) in self._restored.items() if entries]
        if not states:
            return None
        infos = {
            name: {"mode": int(Mode.BROADCAST), "serializer": ser.snapshot_config()}
            for name, ser, _ in states
        }
        body = json.dumps(infos).encode("utf-8")
        out = stream_factory.create_checkpoint_state_output_stream()
        try:
            out.write(_HEAD.pack(_MAGIC, _VERSION, len(body)) + body)
            offsets: dict[str, StateMetaInfo] = {}
            for name, serializer, entries in states:
                positions = []
                for entry in entries:
                    positions.append(out.tell())
                    data = serializer.serialize(entry)
                    out.write(_LEN.pack(len(data)) + data)
                offsets[name] = StateMetaInfo(tuple(positions), Mode.BROADCAST)
            delegate = out.close_and_get_handle()
        except BaseException:
            out.close()
            raise
        if delegate is None:
            return None
        return OperatorStateHandle(offsets, delegate)
