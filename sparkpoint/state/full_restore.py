"""Restore of full (key-groups) snapshots with rescaling, for both backends: read exactly the
key groups a subtask owns from any old handles."""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Sequence

from sparkpoint.checkpoint.handles import KeyGroupsStateHandle, describe_stream
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.errors import CorruptStateError, RestoreError, UntrustedSnapshotError
from sparkpoint.state.key_groups import check_max_parallelism
from sparkpoint.state.snapshot_format import (
    OBJECT_ENCODINGS,
    arrow_state_runs,
    decode_arrow_block,
    decode_object_block,
    open_key_groups,
)
from sparkpoint.state.table import RegisteredStateMeta, StateTable

__all__ = ["PickleBlockSink", "restore_key_groups"]


# (key group, raw block, tables by state id, block encoding: one of OBJECT_ENCODINGS) -> None
PickleBlockSink = Callable[[int, bytes, list[StateTable], str], None]


def restore_key_groups(
    handles: Sequence[KeyGroupsStateHandle],
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    table_for: Callable[[RegisteredStateMeta], StateTable],
    pickle_block_sink: PickleBlockSink | None = None,
) -> int:
    """Put every entry of ``handles`` that lies in ``key_group_range`` into its table.

    Each handle is cut to the range first; only the intersecting key groups are read (a
    seek per group, so file handles are read in ranges). ``pickle_block_sink``, when given,
    receives ``pickle`` and ``pickle-chain`` blocks undecoded (the heap decodes them
    lazily). Returns the number of entries decoded.
    """
    was_enabled = gc.isenabled()
    gc.disable()  # restoring allocates millions of objects and no cycles: skip GC passes
    try:
        return _restore(handles, key_group_range, max_parallelism, table_for, pickle_block_sink)
    finally:
        if was_enabled:
            gc.enable()


# What decoding a block's entries raises for bytes that are not what their state says.
_DECODE_ERRORS = (ValueError, TypeError, AttributeError, IndexError, OverflowError, struct.error)


def _restore(
    handles: Sequence[KeyGroupsStateHandle],
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    table_for: Callable[[RegisteredStateMeta], StateTable],
    pickle_block_sink: PickleBlockSink | None,
) -> int:
    restored = 0
    for handle in handles:
        part = handle.get_intersection(key_group_range)
        if part is None:
            continue
        with open_key_groups(part) as (header, blocks):
            check_max_parallelism(header.max_parallelism, max_parallelism)
            tables = [table_for(meta) for meta in header.states]
            encoding = header.block_encoding
            if encoding != "arrow" and encoding not in OBJECT_ENCODINGS:
                raise RestoreError(f"Unknown key-group block encoding {encoding!r}")
            names = [meta.name for meta in header.states]
            stream = describe_stream(part.delegate)
            for kg, block in blocks:
                if encoding in OBJECT_ENCODINGS and pickle_block_sink is not None:
                    pickle_block_sink(kg, block, tables, encoding)
                    continue
                where = f"{stream}, key group {kg}"
                try:
                    restored += _restore_block(tables, encoding, block, names, kg, where)
                except (CorruptStateError, UntrustedSnapshotError):
                    raise
                except _DECODE_ERRORS as e:
                    raise CorruptStateError(
                        f"Corrupt keyed state in {where}: {type(e).__name__}: {e}"
                    ) from None
    return restored


def _restore_block(
    tables: list[StateTable],
    encoding: str,
    block: bytes,
    names: list[str],
    kg: int,
    where: str,
) -> int:
    """Put one key group's decoded block into ``tables``; returns the entries put."""
    if encoding in OBJECT_ENCODINGS:
        restored = 0
        for sid, objects in decode_object_block(encoding, block, names, where):
            _table(tables, sid, kg).put_group_objects(kg, objects)
            restored += len(objects)
        return restored
    batch = decode_arrow_block(block, where, len(tables))
    for sid, keys, uks, vals in arrow_state_runs(batch):
        _table(tables, sid, kg).put_entries_arrow(kg, keys, uks, vals)
    return int(batch.num_rows)


def _table(tables: list[StateTable], state_id: int, key_group: int) -> StateTable:
    if not 0 <= state_id < len(tables):
        raise RestoreError(
            f"Corrupt keyed state snapshot: state id {state_id} in key group "
            f"{key_group} but only {len(tables)} states"
        )
    return tables[state_id]
