"""The key-groups snapshot format: full checkpoints and canonical savepoints of keyed state.

One stream per subtask (inline when small, one file otherwise), laid out as::

    b"SPKG"  uint16 version (=1)  uint32 n  n bytes UTF-8 JSON header
    per non-empty key group of the range, at KeyGroupRangeOffsets[kg]:
        int32 key_group  uint32 n  n bytes block (see block_encoding)

An empty key group has no block and the offset -1.

All integers are big-endian. The JSON header holds ``format_version``, ``max_parallelism``,
``key_group_range`` ``[start, end]``, ``snapshot_type``, ``backend``, ``block_encoding`` and
``states``: a list of state meta infos (name, kind, serializers, ttl) whose index is the
``state_id``.

``block_encoding = "arrow"`` (savepoints of every backend, RocksDB full checkpoints): each
block is one record batch of the schema ``state_id: uint16, key: binary, user_key: binary
(null except MAP), value: binary`` holding the canonical bytes of ``sparkpoint.state.table``.
Either backend restores it (heap <-> RocksDB), and it is readable without sparkpoint.

``block_encoding = "pickle"`` (heap checkpoints only, for speed): each block is
``pickle.dumps([(state_id, {key: stored value})], protocol=5)`` (MAP: ``{key: {user_key:
stored}}``). Every backend restores it too; it is never used for savepoints.

``block_encoding = "pickle-chain"`` (heap checkpoints copied from the local commit's files,
so a checkpoint costs no encoding): each block is ``pickle.dumps((base_names, base,
deltas), protocol=5)``: ``base`` a ``pickle`` block whose state ids index ``base_names``
(state names; ``None`` for an entry to skip), ``deltas`` a list of ``pickle.dumps([(state
name, {key: stored}, [deleted keys])], protocol=5)`` applied over it in order. Decoded
blocks name states by the header's ``states`` (``decode_object_block``).

A restoring subtask seeks to just the key groups it owns (rescaling).
"""

from __future__ import annotations

import itertools
import json
import pickle
import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from sparkpoint.checkpoint.handles import (
    KeyGroupRangeOffsets,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    describe_stream,
)
from sparkpoint.checkpoint.json_nesting import check_json_nesting
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.streams import CheckpointStateOutputStream
from sparkpoint.errors import CorruptStateError, RestoreError, UntrustedSnapshotError
from sparkpoint.state import pickling
from sparkpoint.state.arrow_checks import ArrowBlockError, read_checked_batch
from sparkpoint.state.table import RegisteredStateMeta

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "OBJECT_ENCODINGS",
    "SCHEMA",
    "Columns",
    "SnapshotHeader",
    "arrow_block",
    "arrow_state_runs",
    "chain_block",
    "check_header",
    "decode_arrow_block",
    "decode_object_block",
    "decode_pickle_block",
    "open_key_groups",
    "pickle_block",
    "read_chain_block",
    "read_header",
    "read_key_group",
    "write_key_groups_snapshot",
]

MAGIC = b"SPKG"
FORMAT_VERSION = 1
SCHEMA = pa.schema(
    [
        pa.field("state_id", pa.uint16(), nullable=False),
        pa.field("key", pa.binary(), nullable=False),
        pa.field("user_key", pa.binary()),
        pa.field("value", pa.binary(), nullable=False),
    ]
)
# Block encodings whose blocks decode to stored objects (heap checkpoints).
OBJECT_ENCODINGS = ("pickle", "pickle-chain")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_BLOCK = struct.Struct(">iI")

# Entries of one state in one key group: key bytes, user-key bytes (MAP) or None, values;
# each a list of bytes or a pyarrow binary array.
Columns = tuple[Any, Any, Any]


@dataclass(frozen=True)
class SnapshotHeader:
    """What precedes the key groups: format version, max parallelism, range and states."""

    max_parallelism: int
    key_group_range: KeyGroupRange
    states: tuple[RegisteredStateMeta, ...]
    snapshot_type: str
    backend: str
    block_encoding: str = "arrow"
    format_version: int = FORMAT_VERSION
    data_start: int = 0

    def to_json(self) -> dict[str, Any]:
        """The JSON header."""
        return {
            "format_version": self.format_version,
            "max_parallelism": self.max_parallelism,
            "key_group_range": [
                self.key_group_range.start_key_group,
                self.key_group_range.end_key_group,
            ],
            "snapshot_type": self.snapshot_type,
            "backend": self.backend,
            "block_encoding": self.block_encoding,
            "states": [m.to_json() for m in self.states],
        }


def _encode_header(header: SnapshotHeader) -> bytes:
    body = json.dumps(header.to_json(), separators=(",", ":")).encode("utf-8")
    return b"".join([MAGIC, _U16.pack(FORMAT_VERSION), _U32.pack(len(body)), body])


def _binary(values: Any) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values, pa.binary())


def _batch(columns: Sequence[tuple[int, Columns]]) -> pa.RecordBatch:
    ids, keys, uks, vals = [], [], [], []
    for state_id, (k, uk, v) in columns:
        n = len(k)
        ids.append(np.full(n, state_id, dtype=np.uint16))
        keys.append(_binary(k))
        uks.append(pa.nulls(n, pa.binary()) if uk is None else _binary(uk))
        vals.append(_binary(v))

    def concat(parts: list[pa.Array]) -> pa.Array:
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

    return pa.record_batch(
        [pa.array(np.concatenate(ids)), concat(keys), concat(uks), concat(vals)],
        schema=SCHEMA,
    )


def arrow_block(
    n_states: int, columns_of: Callable[[int, int], Columns | None], key_group: int
) -> bytes | memoryview | None:
    """The canonical (``arrow``) block of one key group, or ``None`` when it is empty."""
    present = []
    for state_id in range(n_states):
        cols = columns_of(state_id, key_group)
        if cols is not None and len(cols[0]) > 0:
            present.append((state_id, cols))
    if not present:
        return None
    return memoryview(_batch(present).serialize()).cast("B")


def pickle_block(
    n_states: int, objects_of: Callable[[int, int], dict[Any, Any] | None], key_group: int
) -> bytes | None:
    """The ``pickle`` block of one key group: ``[(state_id, {key: stored})]`` (heap checkpoints)."""
    present = []
    for state_id in range(n_states):
        objs = objects_of(state_id, key_group)
        if objs:
            present.append((state_id, objs))
    if not present:
        return None
    return pickle.dumps(present, protocol=5)


def write_key_groups_snapshot(
    out: CheckpointStateOutputStream,
    header: SnapshotHeader,
    block_of: Callable[[int], bytes | memoryview | None],
) -> KeyGroupsStateHandle | None:
    """Write every key group of ``header.key_group_range`` and close ``out`` into a handle.

    ``block_of(key_group)`` encodes one key group (``arrow_block``/``pickle_block``, as
    ``header.block_encoding`` says) or returns ``None`` when it is empty. Returns ``None``
    (and discards the stream) when every group is empty; savepoints yield a
    ``KeyGroupsSavepointStateHandle``.
    """
    from sparkpoint.state.backend import SnapshotType

    try:
        out.write(_encode_header(header))
        offsets: list[int] = []
        non_empty = 0
        for kg in header.key_group_range:
            data = block_of(kg)
            if data is None:
                offsets.append(-1)
                continue
            offsets.append(out.tell())
            non_empty += 1
            out.write(_BLOCK.pack(kg, len(data)))
            out.write(data)
        if non_empty == 0:
            out.close()
            return None
        delegate = out.close_and_get_handle()
    except BaseException:
        out.close()
        raise
    if delegate is None:
        return None
    kgro = KeyGroupRangeOffsets(header.key_group_range, tuple(offsets))
    if header.snapshot_type == SnapshotType.SAVEPOINT:
        return KeyGroupsSavepointStateHandle(kgro, delegate)
    return KeyGroupsStateHandle(kgro, delegate, str(uuid.uuid4()))


def _read_exact(stream: BinaryIO, n: int, what: str) -> bytes:
    data = stream.read(n)
    if data is None or len(data) != n:
        got = 0 if data is None else len(data)
        raise RestoreError(
            f"Truncated keyed state snapshot: expected {n} bytes of {what}, got {got}"
        )
    return bytes(data)


def read_header(stream: BinaryIO, size: int | None = None) -> SnapshotHeader:
    """Read and validate the header at the start of ``stream`` (of ``size`` bytes, when
    known: a header may not declare more than the stream holds)."""
    head = _read_exact(stream, 10, "header")
    if head[:4] != MAGIC:
        raise RestoreError(
            f"Not a sparkpoint keyed state snapshot (magic {head[:4]!r}, expected {MAGIC!r})"
        )
    version = _U16.unpack_from(head, 4)[0]
    if version != FORMAT_VERSION:
        raise RestoreError(
            f"Unsupported keyed state snapshot version {version} "
            f"(this sparkpoint reads version {FORMAT_VERSION})"
        )
    body_len = _U32.unpack_from(head, 6)[0]
    if size is not None and body_len > size - 10:
        raise CorruptStateError(
            f"Corrupt keyed state snapshot header: it declares {body_len} bytes of JSON, "
            f"but the stream holds {size} bytes"
        )
    try:
        text = _read_exact(stream, body_len, "JSON header")
        check_json_nesting(text)
        data = json.loads(text)
    except ValueError as e:
        raise RestoreError(f"Corrupt keyed state snapshot header: {e}") from e
    try:
        start, end = data["key_group_range"]
        return SnapshotHeader(
            max_parallelism=int(data["max_parallelism"]),
            key_group_range=KeyGroupRange.of(start, end),
            states=tuple(RegisteredStateMeta.from_json(s) for s in data["states"]),
            snapshot_type=data["snapshot_type"],
            backend=data["backend"],
            block_encoding=data.get("block_encoding", "arrow"),
            format_version=int(data["format_version"]),
            data_start=10 + body_len,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        # a field missing or of another type: the bytes are not a header this release wrote
        raise RestoreError(f"Corrupt keyed state snapshot header: {type(e).__name__}: {e}") from e


def read_key_group(
    stream: BinaryIO, key_group: int, offset: int, stream_size: int | None = None
) -> bytes | None:
    """The raw block of ``key_group`` at ``offset`` (``None`` when the group is empty); a
    block may not declare more bytes than the stream (of ``stream_size``, when known) holds
    after it."""
    if offset < 0:
        return None
    stream.seek(offset)
    kg, size = _BLOCK.unpack(_read_exact(stream, _BLOCK.size, "key-group block header"))
    if kg != key_group:
        raise RestoreError(
            f"Corrupt keyed state snapshot: expected key group {key_group} at "
            f"offset {offset}, found {kg}"
        )
    if stream_size is not None and size > stream_size - offset - _BLOCK.size:
        raise CorruptStateError(
            f"Corrupt keyed state snapshot: key group {key_group} at offset {offset} "
            f"declares {size} bytes, but the {stream_size}-byte stream ends "
            f"{max(0, stream_size - offset - _BLOCK.size)} bytes after its header"
        )
    if size == 0:
        return None
    return _read_exact(stream, size, f"key group {key_group}")


@contextmanager
def open_key_groups(
    handle: KeyGroupsStateHandle,
) -> Iterator[tuple[SnapshotHeader, Iterator[tuple[int, bytes]]]]:
    """Open the stream of ``handle``: its header, and ``(key group, raw block)`` of each
    non-empty key group of its offsets, in order, read while the ``with`` block lasts. A
    missing file raises ``RestoreError``."""
    try:
        stream = handle.delegate.open_input_stream()
    except FileNotFoundError as e:
        raise RestoreError(f"Keyed state file is missing: {e}") from e
    size = handle.delegate.state_size
    with stream:
        header = read_header(stream, size)
        check_header(handle, header)

        def blocks() -> Iterator[tuple[int, bytes]]:
            for kg, offset in handle.group_range_offsets.items():
                block = read_key_group(stream, kg, offset, size)
                if block is not None:
                    yield kg, block

        yield header, blocks()


def check_header(handle: KeyGroupsStateHandle, header: SnapshotHeader) -> None:
    """Refuse, before any block is read, what a header may not say: pickle blocks in a
    savepoint (savepoints are typed Arrow blocks; a header switching them to pickle would
    make restoring run code) and key-group offsets inside the header."""
    where = describe_stream(handle.delegate)
    savepoint = (
        isinstance(handle, KeyGroupsSavepointStateHandle)
        or header.snapshot_type == "savepoint"
        or header.backend == "state-processor"
    )
    if savepoint and header.block_encoding in OBJECT_ENCODINGS:
        raise UntrustedSnapshotError(
            f"Refusing keyed state {where}: its header declares {header.block_encoding!r} "
            "blocks in a savepoint (savepoints hold typed 'arrow' blocks only; unpickling "
            "these would run code the snapshot chose)"
        )
    for kg, offset in handle.group_range_offsets.items():
        if 0 <= offset < header.data_start:
            raise CorruptStateError(
                f"Corrupt keyed state {where}: key group {kg} starts at offset {offset}, "
                f"inside the {header.data_start}-byte header"
            )


def decode_arrow_block(
    block: bytes | memoryview, where: str = "an arrow key-group block", n_states: int | None = None
) -> pa.RecordBatch:
    """The record batch of an ``arrow`` block, checked in full before and after decoding
    (``arrow_checks``) and, given ``n_states``, every state id indexing the header's states;
    ``CorruptStateError`` naming ``where`` otherwise."""
    try:
        batch = read_checked_batch(block, SCHEMA)
    except ArrowBlockError as exc:
        raise CorruptStateError(f"Corrupt keyed state in {where}: {exc}") from None
    for i in (0, 1, 3):  # the schema's non-nullable columns (IPC does not enforce it)
        if batch.column(i).null_count:
            raise CorruptStateError(
                f"Corrupt keyed state in {where}: null values in column {SCHEMA.field(i).name}"
            )
    if n_states is not None and batch.num_rows:
        ids = batch.column(0).to_numpy()
        top = int(ids.max())
        if top >= n_states:
            raise CorruptStateError(
                f"Corrupt keyed state in {where}: state id {top}, but the header has "
                f"{n_states} states"
            )
    return batch


def arrow_state_runs(batch: pa.RecordBatch) -> Iterator[tuple[int, pa.Array, pa.Array, pa.Array]]:
    """``(state id, keys, user keys, values)`` per run of rows of one state in a decoded
    ``arrow`` block (zero-copy slices)."""
    ids = batch.column(0).to_numpy()
    keys, uks, vals = batch.column(1), batch.column(2), batch.column(3)
    bounds = [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(ids)]
    for lo, hi in itertools.pairwise(bounds):
        n = hi - lo
        yield int(ids[lo]), keys.slice(lo, n), uks.slice(lo, n), vals.slice(lo, n)


def decode_pickle_block(
    block: bytes, where: str = "a pickle key-group block"
) -> list[tuple[int, dict[Any, Any]]]:
    """The ``[(state_id, {key: stored})]`` of a ``pickle`` block."""
    return pickling.loads(block, where)  # type: ignore[no-any-return]


def read_chain_block(
    block: bytes | memoryview, where: str = "a pickle-chain key-group block"
) -> tuple[list[str | None], bytes | None, list[list[tuple[str, dict[Any, Any], list[Any]]]]]:
    """The base state names, the base ``pickle`` block (undecoded) and the decoded deltas of
    a ``pickle-chain`` block."""
    try:
        base_names, base, deltas = pickling.loads(block, where)
        return base_names, base, [pickling.loads(d, where) for d in deltas]
    except (UntrustedSnapshotError, CorruptStateError):
        raise
    except Exception as e:  # any decode failure means corrupt bytes
        raise CorruptStateError(f"Corrupt keyed state in {where}: {e!r}") from e


def decode_object_block(
    encoding: str,
    block: bytes | memoryview,
    state_names: Sequence[str | None],
    where: str | None = None,
) -> list[tuple[int, dict[Any, Any]]]:
    """The ``[(state_id, {key: stored})]`` of a ``pickle`` or ``pickle-chain`` block, the
    state ids indexing ``state_names`` (the header's states, in order); a block of another
    shape raises ``CorruptStateError`` naming ``where``."""
    where = f"the {encoding} key-group block" + (f" of {where}" if where else "")
    if encoding not in OBJECT_ENCODINGS:
        raise RestoreError(f"Unknown key-group block encoding {encoding!r}")
    try:
        return _decode_object_block(encoding, block, state_names, where)
    except (UntrustedSnapshotError, CorruptStateError):
        raise
    except (
        TypeError,
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
        EOFError,
        pickle.UnpicklingError,
    ) as e:
        raise CorruptStateError(f"Corrupt keyed state in {where}: {e!r}") from None


def _decode_object_block(
    encoding: str, block: bytes | memoryview, state_names: Sequence[str | None], where: str
) -> list[tuple[int, dict[Any, Any]]]:
    if encoding == "pickle":
        decoded = pickling.loads(block, where)
        for sid, objects in decoded:
            if not (isinstance(sid, int) and 0 <= sid < len(state_names)):
                raise ValueError(f"state id {sid!r} of {len(state_names)} states")
            if not isinstance(objects, dict):
                raise ValueError(f"a {type(objects).__name__} where a dict of entries belongs")
        return decoded  # type: ignore[no-any-return]
    base_names, base, deltas = read_chain_block(block, where)
    index = {name: i for i, name in enumerate(state_names) if name is not None}
    groups: dict[int, dict[Any, Any]] = {}
    if base is not None:
        for local_id, objects in pickling.loads(base, where):
            sid = index.get(base_names[local_id])
            if sid is not None:
                groups[sid] = objects
    for delta in deltas:
        for name, updates, deleted in delta:
            sid = index.get(name)
            if sid is None:
                continue
            group = groups.setdefault(sid, {})
            group.update(updates)
            for key in deleted:
                group.pop(key, None)
    return sorted(groups.items())


def chain_block(
    base_names: Sequence[str | None], base: bytes | None, deltas: Sequence[bytes]
) -> bytes:
    """A ``pickle-chain`` block (see the module docstring)."""
    return pickle.dumps((list(base_names), base, list(deltas)), protocol=5)
