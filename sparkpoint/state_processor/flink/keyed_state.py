"""Reading one subtask's keyed state stream of a canonical Flink savepoint, pure Python.

The stream (Flink's ``FullSnapshotAsyncWriter``, the same for the hashmap and RocksDB
backends in canonical format) starts with ``KeyedBackendSerializationProxy``: its version,
whether key groups are Snappy-compressed, the key serializer snapshot and the state meta
infos (name, state type, options, serializer snapshots). Then per key group with state, at
the offset ``_metadata`` records (and compressed when so flagged): the first state's id
as a short, then entries as length-prefixed key and value bytes (the key group is the
first byte or two of each key). The last entry of a state has the top bit of its key's
first byte set; a short follows it: the next state's id, or ``END_OF_KEY_GROUP_MARK`` (0xFFFF).

Keys are RocksDB's composite layout: the key group in 1 or 2 bytes, the serialized key,
the namespace, and for map state the user key; the lengths of key and namespace follow
each as a variable-length int when both are variable-sized.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.metadata import KeyGroupsHandle
from sparkpoint.state_processor.flink.serializers import (
    SerializerSnapshot,
    read_serializer_snapshot,
    value_decoder,
)

__all__ = [
    "KeyedStateStream",
    "StateEntry",
    "StateMetaInfo",
    "key_group_blocks",
    "read_keyed_state_header",
    "read_keyed_state_stream",
    "read_state_meta_info",
]

PROXY_VERSIONS = (6,)  # KeyedBackendSerializationProxy versions read (Flink 1.7 on)
META_INFO_VERSIONS = {6: 6}
END_OF_KEY_GROUP_MARK = 0xFFFF
FIRST_BIT_IN_BYTE_MASK = 0x80
# StateMetaInfoSnapshot.BackendStateType ordinals.
BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE")


@dataclass(frozen=True)
class StateMetaInfo:
    """One registered state: its name, backend type (``KEY_VALUE`` or ``PRIORITY_QUEUE``
    for timers), options (``KEYED_STATE_TYPE``: VALUE, LIST, MAP, ...) and serializers."""

    name: str
    backend_type: str
    options: dict[str, str]
    serializers: dict[str, SerializerSnapshot] = field(default_factory=dict)

    @property
    def state_type(self) -> str | None:
        return self.options.get("KEYED_STATE_TYPE")


@dataclass(frozen=True)
class StateEntry:
    """One entry: its key group and raw key, namespace, user key (MAP) and value bytes."""

    key_group: int
    key: bytes
    namespace: bytes
    user_key: bytes | None
    value: bytes


@dataclass(frozen=True)
class KeyedStateStream:
    version: int
    compressed: bool
    key_serializer: SerializerSnapshot
    states: tuple[StateMetaInfo, ...]
    header_end: int


def _read_header(inp: DataInput) -> KeyedStateStream:
    version = inp.i32()
    if version not in PROXY_VERSIONS:
        raise FlinkFormatError(
            f"{inp.what}: keyed state serialization proxy version {version}; this reader knows "
            f"{', '.join(map(str, PROXY_VERSIONS))}"
        )
    compressed = inp.boolean()
    key = read_serializer_snapshot(inp, "the key serializer")
    n = inp.i16()
    if n < 0:
        raise inp.fail(f"{n} states")
    states = [read_state_meta_info(inp) for _ in range(n)]
    return KeyedStateStream(version, compressed, key, tuple(states), inp.pos)


def read_state_meta_info(inp: DataInput) -> StateMetaInfo:
    """One ``StateMetaInfoSnapshot`` (keyed and operator state write them alike): name,
    backend state type, options, serializer snapshots."""
    name = inp.utf()
    t = inp.i32()
    if not 0 <= t < len(BACKEND_STATE_TYPES):
        raise inp.fail(f"state {name!r}: unknown backend state type {t}")
    options = {}
    for _ in range(inp.count(f"options of state {name!r}", 4)):
        k = inp.utf()
        options[k] = inp.utf()
    serializers = {}
    for _ in range(inp.count(f"serializers of state {name!r}", 4)):
        k = inp.utf()
        serializers[k] = read_serializer_snapshot(inp, f"the {k} of state {name!r}")
    return StateMetaInfo(name, BACKEND_STATE_TYPES[t], options, serializers)


def read_keyed_state_stream(
    handle: KeyGroupsHandle, max_parallelism: int, what: str
) -> tuple[KeyedStateStream, Iterator[tuple[int, StateEntry]]]:
    """The stream's header, and its entries as ``(state id, entry)`` in key group order."""
    data = handle.stream.read()
    inp = DataInput(data, what)
    header = _read_header(inp)
    return header, _entries(data, what, handle, header, max_parallelism)


def _entries(
    data: bytes,
    what: str,
    handle: KeyGroupsHandle,
    header: KeyedStateStream,
    max_parallelism: int,
) -> Iterator[tuple[int, StateEntry]]:
    prefix_bytes = 2 if max_parallelism > 128 else 1
    for kg, block in key_group_blocks(data, what, handle, header):
        yield from _key_group_entries(block, kg, header, prefix_bytes)


def key_group_blocks(
    data: bytes, what: str, handle: KeyGroupsHandle, header: KeyedStateStream
) -> Iterator[tuple[int, DataInput]]:
    """Per key group with state, in key group order: its number and a reader over its
    entries (decompressed when the stream says so), its offset checked against the stream."""
    present = sorted(
        (off, handle.start_key_group + i) for i, off in enumerate(handle.offsets) if off != 0
    )
    for j, (offset, kg) in enumerate(present):
        if offset < header.header_end or offset >= len(data):
            raise FlinkFormatError(
                f"{what}: key group {kg} at offset {offset}, outside the stream's state "
                f"bytes {header.header_end}..{len(data)}"
            )
        end = present[j + 1][0] if j + 1 < len(present) else len(data)
        inp = DataInput(data, what, offset, end)
        if header.compressed:
            yield kg, DataInput(_snappy_framed(bytes(inp.take(inp.remaining)), what, kg), what)
        else:
            yield kg, inp


def read_keyed_state_header(handle: KeyGroupsHandle, what: str) -> tuple[bytes, KeyedStateStream]:
    """The stream's bytes and its header (for readers that walk the key groups themselves)."""
    data = handle.stream.read()
    return data, _read_header(DataInput(data, what))


def _key_group_entries(
    inp: DataInput, kg: int, header: KeyedStateStream, prefix_bytes: int
) -> Iterator[tuple[int, StateEntry]]:
    parts = _key_parts(header)
    state_id = inp.i16()
    while True:
        if not 0 <= state_id < len(header.states):
            raise inp.fail(f"key group {kg}: state id {state_id} of {len(header.states)} states")
        key = bytearray(inp.sized_bytes("an entry key"))
        value = inp.sized_bytes("an entry value")
        if not key:
            raise inp.fail(f"key group {kg}: an empty entry key")
        last = bool(key[0] & FIRST_BIT_IN_BYTE_MASK)
        key[0] &= ~FIRST_BIT_IN_BYTE_MASK & 0xFF
        meta = header.states[state_id]
        yield state_id, _split(bytes(key), value, kg, meta, parts[state_id], inp, prefix_bytes)
        if last:
            nxt = inp.i16() & 0xFFFF
            if nxt == END_OF_KEY_GROUP_MARK:
                if inp.remaining:
                    raise inp.fail(f"key group {kg}: {inp.remaining} bytes after its end mark")
                return
            state_id = nxt


_Parts = list[tuple[Callable[[DataInput], Any], Callable[[DataInput], Any], bool] | None]


def _key_parts(header: KeyedStateStream) -> _Parts:
    """Per state: the key and namespace readers and whether their lengths follow them."""
    key_read = value_decoder(header.key_serializer)
    out: _Parts = []
    for meta in header.states:
        ns = meta.serializers.get("NAMESPACE_SERIALIZER")
        if meta.backend_type == "PRIORITY_QUEUE" or ns is None:
            out.append(None)
            continue
        ambiguous = header.key_serializer.fixed_length < 0 and ns.fixed_length < 0
        out.append((key_read, value_decoder(ns), ambiguous))
    return out


def _split(
    key: bytes,
    value: bytes,
    kg: int,
    meta: StateMetaInfo,
    part: tuple[Callable[[DataInput], Any], Callable[[DataInput], Any], bool] | None,
    at: DataInput,
    prefix_bytes: int,
) -> StateEntry:
    """Cut a composite key into key group, key, namespace and user key."""
    inp = DataInput(key, at.what)
    stored = int.from_bytes(inp.take(prefix_bytes), "big")
    if stored != kg:
        raise at.fail(f"a key of state {meta.name!r} names key group {stored} in key group {kg}")
    if meta.backend_type == "PRIORITY_QUEUE":
        # Timers: the whole element (timestamp, key, namespace) is the key; no value.
        return StateEntry(kg, bytes(inp.take(inp.remaining)), b"", None, value)
    if part is None:
        raise UnsupportedFlinkStateError(
            f"{at.what}: state {meta.name!r} has no namespace serializer"
        )
    key_read, ns_read, ambiguous = part
    start = inp.pos
    key_read(inp)
    key_bytes = key[start : inp.pos]
    if ambiguous:
        _skip_length(inp, len(key_bytes))
    start = inp.pos
    ns_read(inp)
    ns_bytes = key[start : inp.pos]
    if ambiguous:
        _skip_length(inp, len(ns_bytes))
    user_key = key[inp.pos :] if meta.state_type == "MAP" else None
    if user_key is None and inp.remaining:
        raise at.fail(f"a key of state {meta.name!r} has {inp.remaining} unread bytes")
    return StateEntry(kg, key_bytes, ns_bytes, user_key, value)


def _skip_length(inp: DataInput, length: int) -> None:
    """Skip ``CompositeKeySerializationUtils.writeVariableIntBytes(length)``: the length's
    bytes, low first, at least one; they must match the length just read."""
    n = max(1, (length.bit_length() + 7) // 8)
    if int.from_bytes(inp.take(n), "little") != length:
        raise inp.fail(f"a composite key's part length does not match its {length} bytes")


def _snappy_framed(data: bytes, what: str, kg: int) -> bytes:
    try:
        import cramjam  # type: ignore[import-not-found]
    except ImportError as e:
        raise UnsupportedFlinkStateError(
            f"{what}: the savepoint's key groups are Snappy-compressed; install the "
            "'flink' extra (pip install 'sparkpoint[flink]', for cramjam) to read them"
        ) from e
    try:
        return bytes(cramjam.snappy.decompress(data))
    except Exception as e:
        raise FlinkFormatError(f"{what}: key group {kg}: corrupt Snappy data: {e}") from e
