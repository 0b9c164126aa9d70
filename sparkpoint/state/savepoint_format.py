"""Reading keyed state of savepoints (and full checkpoints) as Arrow tables, for tools.

The on-disk format is ``snapshot_format`` (documented in ``docs/savepoint-format.md``);
both backends write it for ``SnapshotType.SAVEPOINT`` with canonical ``arrow`` blocks, and
both restore it. ``read_savepoint_state(pointer)`` returns one row per entry::

    operator_id: string, subtask: int32, state_name: string, state_kind: string,
    key_group: int32, key: binary, user_key: binary (MAP only), value: binary,
    ttl_timestamp: int64 (last access in ms; null without TTL and for LIST)

``decode_savepoint_column`` turns a ``key``/``user_key``/``value`` column back into Python
objects with the serializer recorded in the snapshot header.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkpoint.checkpoint.discovery import load_pointer
from sparkpoint.checkpoint.handles import KeyedStateHandle, KeyGroupsStateHandle
from sparkpoint.checkpoint.metadata import OperatorState
from sparkpoint.errors import CorruptStateError, RestoreError
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.snapshot_format import (
    OBJECT_ENCODINGS,
    SnapshotHeader,
    check_header,
    decode_arrow_block,
    decode_object_block,
    read_header,
    read_key_group,
)
from sparkpoint.state.table import RegisteredStateMeta

__all__ = [
    "SAVEPOINT_TABLE_SCHEMA",
    "decode_savepoint_column",
    "operator_table",
    "read_keyed_state",
    "read_savepoint_state",
    "read_snapshot_headers",
]

SAVEPOINT_TABLE_SCHEMA = pa.schema(
    [
        pa.field("operator_id", pa.string()),
        pa.field("subtask", pa.int32()),
        pa.field("state_name", pa.string()),
        pa.field("state_kind", pa.string()),
        pa.field("key_group", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("user_key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("ttl_timestamp", pa.int64()),
    ]
)


def _object_rows(
    meta: RegisteredStateMeta, objects: dict[Any, Any]
) -> Iterable[tuple[bytes, bytes | None, bytes]]:
    for key, stored in objects.items():
        kb = meta.encode_key(key)
        if meta.kind is StateKind.MAP:
            for uk, v in stored.items():
                yield kb, meta.encode_user_key(uk), meta.encode_value(v)
        else:
            yield kb, None, meta.encode_value(stored)


def read_keyed_state(
    handle: KeyGroupsStateHandle, operator_id: str = "", subtask: int = 0
) -> pa.Table:
    """Every entry of one key-groups handle as a table of ``SAVEPOINT_TABLE_SCHEMA``."""
    cols: dict[str, list[Any]] = {f.name: [] for f in SAVEPOINT_TABLE_SCHEMA}

    def add(meta: RegisteredStateMeta, kg: int, k: bytes, uk: bytes | None, v: bytes) -> None:
        cols["operator_id"].append(operator_id)
        cols["subtask"].append(subtask)
        cols["state_name"].append(meta.name)
        cols["state_kind"].append(meta.kind.value)
        cols["key_group"].append(kg)
        cols["key"].append(k)
        cols["user_key"].append(uk)
        cols["value"].append(v)
        cols["ttl_timestamp"].append(meta.ttl_timestamp_of(v))

    size = handle.delegate.state_size
    try:
        stream = handle.delegate.open_input_stream()
    except FileNotFoundError as e:
        raise RestoreError(f"Keyed state file is missing: {e}") from e
    with stream:
        header = read_header(stream, size)
        check_header(handle, header)
        for kg, offset in handle.group_range_offsets.items():
            block = read_key_group(stream, kg, offset, size)
            if block is None:
                continue
            if header.block_encoding in OBJECT_ENCODINGS:
                where = f"{handle.delegate.physical_id}, key group {kg} at offset {offset}"
                try:
                    for sid, objects in decode_object_block(
                        header.block_encoding, block, [m.name for m in header.states], where
                    ):
                        meta = header.states[sid]
                        for k, uk, v in _object_rows(meta, objects):
                            add(meta, kg, k, uk, v)
                except (AttributeError, TypeError, ValueError) as e:
                    if isinstance(e, CorruptStateError):
                        raise
                    raise CorruptStateError(
                        f"Corrupt keyed state in {where}: {type(e).__name__}: {e}"
                    ) from None
                continue
            batch = _checked_arrow_block(handle, header, kg, offset, block)
            ids = batch.column(0).to_pylist()
            keys = batch.column(1).to_pylist()
            uks = batch.column(2).to_pylist()
            vals = batch.column(3).to_pylist()
            for i, sid in enumerate(ids):
                add(header.states[sid], kg, keys[i], uks[i], vals[i])
    return pa.table(cols, schema=SAVEPOINT_TABLE_SCHEMA)


def _checked_arrow_block(
    handle: KeyGroupsStateHandle, header: SnapshotHeader, kg: int, offset: int, block: bytes
) -> pa.RecordBatch:
    """The ``arrow`` block of key group ``kg``, refused (``CorruptStateError`` naming the
    stream, key group and offset) unless its buffers are consistent and every state id
    indexes the header's states: offsets come from a ``_metadata``, which may be crafted."""
    where = f"{handle.delegate.physical_id}, key group {kg} at offset {offset}"
    batch = decode_arrow_block(block, where, len(header.states))
    ids = batch.column(0)
    bounds = pc.min_max(ids)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if ids.null_count or (len(ids) and not 0 <= low <= high < len(header.states)):
        raise RestoreError(
            f"Corrupt keyed state in {where}: a state id outside the "
            f"{len(header.states)} states of its header"
        )
    return batch


def read_snapshot_headers(handles: Sequence[KeyedStateHandle]) -> list[SnapshotHeader]:
    """The headers (max parallelism, states and serializers) of key-groups handles."""
    out = []
    for h in handles:
        if isinstance(h, KeyGroupsStateHandle):
            with h.delegate.open_input_stream() as stream:
                out.append(read_header(stream, h.delegate.state_size))
    return out


def read_savepoint_state(pointer: str, operator_id: str | None = None) -> pa.Table:
    """All keyed state of the savepoint/checkpoint at ``pointer`` (directory or ``_metadata``)
    as one Arrow table (see the module docstring), optionally of one operator only."""
    metadata, _ = load_pointer(pointer)
    tables = [SAVEPOINT_TABLE_SCHEMA.empty_table()]
    for op in metadata.operator_states:
        if operator_id is None or op.operator_id == operator_id:
            tables.append(operator_table(op))
    return pa.concat_tables(tables)


def operator_table(op: OperatorState) -> pa.Table:
    """Every keyed-state entry of one operator (all subtasks) as one table."""
    tables = [SAVEPOINT_TABLE_SCHEMA.empty_table()]
    for index, sub in op.subtask_states.items():
        for handle in sub.managed_keyed_state:
            if not isinstance(handle, KeyGroupsStateHandle):
                raise RestoreError(
                    f"Operator {op.operator_id} subtask {index} holds a "
                    f"{type(handle).__name__} (an incremental checkpoint); only savepoints "
                    "and full checkpoints can be read as tables"
                )
            tables.append(read_keyed_state(handle, op.operator_id, index))
    return pa.concat_tables(tables)


def decode_savepoint_column(
    column: pa.Array | pa.ChunkedArray, serializer_config: Any
) -> list[Any]:
    """Python objects of a ``key``/``user_key`` column, given the serializer config from the
    header (``RegisteredStateMeta.to_json()['key_serializer']`` etc.)."""
    from sparkpoint.state.serializers import serializer_from_config

    ser = serializer_from_config(serializer_config)
    return [None if b is None else ser.deserialize(b) for b in column.to_pylist()]
