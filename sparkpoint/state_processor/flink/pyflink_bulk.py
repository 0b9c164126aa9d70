"""Reading PyFlink's process-mode keyed state a subtask at a time, for the common layout.

``pyflink_state`` decodes an entry at a time (a reader object, a key split and decoder
calls per entry: 95 us per key of the 1M-key benchmark, four entries each). Here one loop
walks a key group's entries with ``struct.unpack_from`` on the stream's bytes, keys are
unpickled once per key and in batches (``pickling.loads_many``: the same bounded plain-data
loading), and the values of a state are checked and decoded together (with numpy where
their type has a fixed width). It takes the layout PyFlink writes: a ``Row`` of one pickled
key field, states outside windows (``VoidNamespace``), process-mode (``python-state-*``)
states. Anything else it meets (another key or namespace serializer, an entry of a state it
has no decoder for, a length or mark that does not add up, a value that is not in its usual
form) makes it decline the subtask, which ``pyflink_state`` then reads entry by entry: same
results, same errors, the checks of that reader unchanged. Values of types without a batch
decoder (LIST state, for one) are decoded here entry by entry by that reader's own plan.
"""

from __future__ import annotations

import gc
import itertools
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from sparkpoint.state import pickling
from sparkpoint.state import typeinfo as ti
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    StateKind,
)
from sparkpoint.state_processor.flink.keyed_state import (
    END_OF_KEY_GROUP_MARK,
    FIRST_BIT_IN_BYTE_MASK,
    KeyedStateStream,
    key_group_blocks,
)
from sparkpoint.state_processor.flink.metadata import KeyGroupsHandle

__all__ = ["Declined", "paused_gc", "read_subtask_bulk"]

_I32 = struct.Struct(">i").unpack_from
_U16 = struct.Struct(">H").unpack_from
_FIXED = {
    "LONG": ">i8",
    "INT": ">i4",
    "SHORT": ">i2",
    "BYTE": "i1",
    "BOOLEAN": "u1",
    "DOUBLE": ">f8",
    "FLOAT": ">f4",
}
# A batch decoder: the element bytes of many entries -> their values, or None to decline.
BatchDecoder = Callable[[list[bytes]], list[Any] | None]
# The entry-by-entry reader's ``add(states of the key, user key, value bytes, key)``.
Adder = Callable[[dict[str, Any], bytes | None, bytes, Any], None]


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection in the block: a bulk read or write makes millions of
    containers and no cycles, and each full collection would walk them all."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Declined(Exception):
    """The subtask is not in the layout read here (not an error: read it entry by entry)."""


# -- the entries of a key group ------------------------------------------------------------

Segment = tuple[int, list[bytes], list[bytes], list[bytes] | None]
"""A run of one state's entries in a key group: state id, key rows, values, user keys."""


def _scan_key_group(  # noqa: C901 - the hot loop, inlined
    buf: bytes,
    pos: int,
    end: int,
    kg: int,
    prefix_bytes: int,
    is_map: Sequence[bool | None],
    segments: list[Segment],
) -> None:
    """Append the key group's state runs to ``segments``: ``(state id, key rows, values,
    user keys)`` with the key rows as the key serializer wrote them (null mask, length,
    pickle), every length checked against the key group's bytes."""
    i32, u16 = _I32, _U16
    least = prefix_bytes + 5  # a key holds its key group, the row's mask and length, the namespace
    if pos + 2 > end:
        raise Declined
    (sid,) = u16(buf, pos)
    pos += 2
    n_states = len(is_map)
    starts: list[int] = []  # of the keys not of MAP state: checked together below
    unchecked: list[list[bytes]] = []
    while True:
        if sid >= n_states or is_map[sid] is None:
            raise Declined
        rows: list[bytes] = []
        values: list[bytes] = []
        if not is_map[sid]:  # the row is the key but for the key group and namespace
            unchecked.append(rows)
            while True:
                if pos + 4 > end:
                    raise Declined
                (klen,) = i32(buf, pos)
                ks = pos + 4
                ke = ks + klen
                if klen <= least or ke + 4 > end:
                    raise Declined
                (vlen,) = i32(buf, ke)
                vs = ke + 4
                pos = vs + vlen
                if vlen < 0 or pos > end:
                    raise Declined
                starts.append(ks)
                rows.append(buf[ks + prefix_bytes : ke - 1])
                values.append(buf[vs:pos])
                if buf[ks] & FIRST_BIT_IN_BYTE_MASK:
                    break
            segments.append((sid, rows, values, None))
        else:  # the row's length says where the user key starts
            user_keys: list[bytes] = []
            while True:
                if pos + 4 > end:
                    raise Declined
                (klen,) = i32(buf, pos)
                ks = pos + 4
                ke = ks + klen
                if klen <= least or ke + 4 > end:
                    raise Declined
                (vlen,) = i32(buf, ke)
                vs = ke + 4
                pos = vs + vlen
                if vlen < 0 or pos > end:
                    raise Declined
                b0 = buf[ks]
                stored = b0 & 0x7F if prefix_bytes == 1 else ((b0 & 0x7F) << 8) | buf[ks + 1]
                row = ks + prefix_bytes
                if stored != kg or buf[row]:  # the row's null mask: no null field
                    raise Declined
                (n,) = i32(buf, row + 1)
                row_end = row + 5 + n  # the namespace's one byte follows
                if n < 0 or row_end >= ke:
                    raise Declined
                rows.append(buf[row:row_end])
                values.append(buf[vs:pos])
                user_keys.append(buf[row_end + 1 : ke])
                if b0 & FIRST_BIT_IN_BYTE_MASK:
                    break
            segments.append((sid, rows, values, user_keys))
        if pos + 2 > end:
            raise Declined
        (sid,) = u16(buf, pos)
        pos += 2
        if sid == END_OF_KEY_GROUP_MARK:
            if pos != end:
                raise Declined
            break
    if starts:
        _check_rows(buf, np.array(starts, np.int64), unchecked, kg, prefix_bytes)


def _check_rows(
    buf: bytes, starts: np.ndarray, rows: list[list[bytes]], kg: int, prefix_bytes: int
) -> None:
    """The keys at ``starts`` (their rows cut as all but the namespace's last byte) name
    key group ``kg``, have no null field, and their row's length is that of the cut."""
    data = np.frombuffer(buf, np.uint8)
    stored = data[starts].astype(np.int64) & 0x7F
    if prefix_bytes == 2:
        stored = (stored << 8) | data[starts + 1]
    at = starts + prefix_bytes
    lengths = (
        (data[at + 1].astype(np.int64) << 24)
        | (data[at + 2].astype(np.int64) << 16)
        | (data[at + 3].astype(np.int64) << 8)
        | data[at + 4]
    )
    cut = np.fromiter((len(r) for seg in rows for r in seg), np.int64, len(starts))
    if (stored != kg).any() or data[at].any() or not np.array_equal(lengths, cut - 5):
        raise Declined


# -- batch decoders of PyFlink's coder bytes -------------------------------------------------


def _unwrap(values: list[bytes], flag: bool, depth: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Check that every value is ``[0 flag byte] [int length] ... [int length] content``,
    each length that of the rest; returns the values' bytes as one array and their
    lengths, or None when some value is not so."""
    head = (1 if flag else 0) + 4 * depth
    lens = np.fromiter(map(len, values), np.int64, len(values))
    if not len(values):
        return np.zeros(0, np.uint8), lens
    if lens.min() < head:
        return None
    joined = np.frombuffer(b"".join(values), np.uint8)
    starts = np.zeros(len(values), np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    at = starts
    if flag:
        if joined[at].any():
            return None
        at = at + 1
    for _ in range(depth):
        got = (
            (joined[at].astype(np.int64) << 24)
            | (joined[at + 1].astype(np.int64) << 16)
            | (joined[at + 2].astype(np.int64) << 8)
            | joined[at + 3]
        )
        if not np.array_equal(got, lens - (at - starts) - 4):
            return None
        at = at + 4
    return joined, lens


def _decoder(info: ti.TypeInformation, flag: bool, depth: int) -> BatchDecoder | None:
    """The batch decoder of values of ``info`` framed by an optional null flag (map values)
    and ``depth`` nested lengths, or None when the type has none."""
    head = (1 if flag else 0) + 4 * depth
    if isinstance(info, ti.BasicTypeInfo) and info.type_name in _FIXED:
        dtype = np.dtype(_FIXED[info.type_name])
        width = dtype.itemsize
        boolean = info.type_name == "BOOLEAN"

        def fixed(values: list[bytes]) -> list[Any] | None:
            if not values:
                return []
            framed = _unwrap(values, flag, depth)
            if framed is None or (framed[1] != head + width).any():
                return None
            rows = framed[0].reshape(len(values), head + width)
            out = rows[:, head:].copy().view(dtype).reshape(len(values))
            return (out != 0).tolist() if boolean else out.tolist()

        return fixed
    if isinstance(info, ti.PickledBytesTypeInfo):
        if depth < 2:
            return None  # a pickle not length-prefixed takes the element's rest: per entry

        def pickled(values: list[bytes]) -> list[Any] | None:
            if _unwrap(values, flag, depth) is None:
                return None
            try:
                return pickling.loads_many([v[head:] for v in values], "a pickled value")
            except Exception:
                return None

        return pickled
    if isinstance(info, ti.BasicTypeInfo) and info.type_name == "STRING" and depth >= 2:

        def strings(values: list[bytes]) -> list[Any] | None:
            if _unwrap(values, flag, depth) is None:
                return None
            try:
                return [v[head:].decode("utf-8") for v in values]
            except UnicodeDecodeError:
                return None

        return strings
    return None


def _state_decoders(
    desc: StateDescriptor,
) -> tuple[BatchDecoder | None, BatchDecoder | None]:
    """(value decoder, user key decoder) of a process-mode state: a VALUE state's entry is
    a list of one element (``[int length] [coder bytes]``), the coder of a variable-length
    type writing ``[int length] bytes``; a MAP entry's user key is a byte array holding the
    coder bytes, its value a null flag and the coder bytes as a byte array."""
    if isinstance(desc, MapStateDescriptor):
        value_depth = 1 if _is_fixed(desc.value_type_info) else 2
        key_depth = 1 if _is_fixed(desc.key_type_info) else 2
        return (
            _decoder(desc.value_type_info, True, value_depth),
            _decoder(desc.key_type_info, False, key_depth),
        )
    if isinstance(desc, ListStateDescriptor) or desc.kind is not StateKind.VALUE:
        return None, None
    depth = 1 if _is_fixed(desc.type_info) else 2
    return _decoder(desc.type_info, False, depth), None


def _is_fixed(info: ti.TypeInformation) -> bool:
    return isinstance(info, ti.BasicTypeInfo) and info.type_name in _FIXED


# -- one subtask ----------------------------------------------------------------------------


def read_subtask_bulk(
    data: bytes,
    header: KeyedStateStream,
    handle: KeyGroupsHandle,
    max_parallelism: int,
    states: Sequence[tuple[StateDescriptor, Adder] | None],
    what: str,
) -> dict[Any, dict[str, Any]]:
    """Per Python key, per state name, the values of one subtask's stream. ``states`` has,
    per state of the stream, its descriptor and the entry-by-entry reader's ``add`` (used
    for values without a batch decoder), or None for a state not read here (a process-mode
    state is). Raises ``Declined`` when the stream is not in the layout read here."""
    key = header.key_serializer
    if key.kind != "row" or len(key.nested) != 1 or key.nested[0].kind != "bytes":
        raise Declined
    if len(states) != len(header.states):
        raise Declined
    usable: list[tuple[StateDescriptor, Adder] | None] = []
    for meta, state in zip(header.states, states):
        ns = meta.serializers.get("NAMESPACE_SERIALIZER")
        void = ns is not None and ns.kind == "void" and meta.backend_type == "KEY_VALUE"
        usable.append(state if void else None)
    is_map = [None if s is None else s[0].kind is StateKind.MAP for s in usable]
    prefix_bytes = 2 if max_parallelism > 128 else 1
    segments: list[Segment] = []
    for kg, block in key_group_blocks(data, what, handle, header):
        raw = block.data.obj
        buf = raw if isinstance(raw, bytes) else bytes(block.data)
        _scan_key_group(buf, block.pos, block.end, kg, prefix_bytes, is_map, segments)
    key_of = _keys(segments, f"{what}: a pickled key")
    decoded = _decode(segments, usable)
    return _apply(segments, usable, decoded, key_of)


def _keys(segments: list[Segment], what: str) -> dict[bytes, Any]:
    """Every distinct key row's Python key: the pickles loaded in one batch."""
    rows = dict.fromkeys(itertools.chain.from_iterable(seg[1] for seg in segments))
    try:
        return dict(zip(rows, pickling.loads_many([r[5:] for r in rows], what)))
    except Exception:
        raise Declined from None


def _decode(
    segments: list[Segment], usable: list[tuple[StateDescriptor, Adder] | None]
) -> dict[tuple[int, int], list[Any]]:
    """Per segment (its index, then 0 for values, 1 for user keys) its decoded values, for
    the states with batch decoders: a state's entries decoded in one batch."""
    decoded: dict[tuple[int, int], list[Any]] = {}
    for sid, state in enumerate(usable):
        if state is None:
            continue
        value_dec, user_key_dec = _state_decoders(state[0])
        mapped = state[0].kind is StateKind.MAP
        if value_dec is None or (mapped and user_key_dec is None):
            continue
        mine = [j for j, seg in enumerate(segments) if seg[0] == sid]
        parts = [(0, value_dec)] + ([(1, user_key_dec)] if mapped else [])
        for part, decode in parts:
            assert decode is not None
            batch = [v for j in mine for v in _part(segments[j], part)]
            got = decode(batch)
            if got is None:
                raise Declined
            at = 0
            for j in mine:
                n = len(segments[j][1])
                decoded[(j, part)] = got[at : at + n]
                at += n
    return decoded


def _part(segment: Segment, part: int) -> list[bytes]:
    """A segment's values (``part`` 0) or user keys (1)."""
    return segment[2] if part == 0 else segment[3] or []


def _apply(
    segments: list[Segment],
    usable: list[tuple[StateDescriptor, Adder] | None],
    decoded: dict[tuple[int, int], list[Any]],
    key_of: dict[bytes, Any],
) -> dict[Any, dict[str, Any]]:
    """The values per key and state, applied in the stream's order as the entry-by-entry
    reader does (its ``add`` for values without a batch decoder)."""
    out: dict[Any, dict[str, Any]] = {}
    for j, (sid, rows, values, user_keys) in enumerate(segments):
        state = usable[sid]
        assert state is not None
        desc, add = state
        name = desc.name
        got = decoded.get((j, 0))
        keyed = []
        for r in rows:
            k = key_of[r]
            mine = out.get(k)
            if mine is None:
                mine = out[k] = {}
            keyed.append((k, mine))
        if got is None:
            uks: Sequence[bytes | None] = [None] * len(rows) if user_keys is None else user_keys
            for (k, mine), v, u in zip(keyed, values, uks):
                add(mine, u, v, k)
        elif user_keys is None:
            for (_, mine), v in zip(keyed, got):
                mine[name] = v
        else:
            for (_, mine), v, u in zip(keyed, got, decoded[(j, 1)]):
                m = mine.get(name)
                if m is None:
                    m = mine[name] = {}
                m[u] = v
    return out
