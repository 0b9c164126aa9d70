"""Restore of incremental RocksDB handles, with rescaling.

The handle sharing the most key groups with the new range becomes the base: its files are
downloaded into a fresh directory that replaces the local database, and key groups outside
the range are dropped with range deletes (Flink does the same with ``deleteRange``). Every
other intersecting handle is downloaded, opened read-only, and the entries of the key groups
in range are copied in, with state ids mapped by state name.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

import rocksdict

from sparkpoint.checkpoint.handles import (
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
    StreamStateHandle,
)
from sparkpoint.errors import RestoreError
from sparkpoint.state.key_groups import check_max_parallelism
from sparkpoint.state.rocksdb.incremental import download_handle, read_incremental_meta
from sparkpoint.state.rocksdb.local_db import REGISTRY_END, REGISTRY_PREFIX, key_group_bounds
from sparkpoint.state.table import RegisteredStateMeta

if TYPE_CHECKING:
    from sparkpoint.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["restore_incremental"]

_MAX_KEY_GROUP_BYTES = b"\x80\x00"


def _registry_of(db: rocksdict.Rdict) -> dict[int, RegisteredStateMeta]:
    """State id -> meta of a (downloaded) database."""
    read_opt = rocksdict.ReadOptions()
    read_opt.set_iterate_upper_bound(REGISTRY_END)
    out: dict[int, RegisteredStateMeta] = {}
    for _key, raw in db.items(from_key=REGISTRY_PREFIX, read_opt=read_opt):
        record = json.loads(bytes(raw).decode("utf-8"))
        out[int(record["id"])] = RegisteredStateMeta.from_json(record["meta"])
    return out


def _copy_key_groups(
    backend: RocksDBKeyedStateBackend, directory: str, start: int, end: int
) -> None:
    """Copy key groups ``start..end`` of the database in ``directory`` into ``backend``."""
    db = rocksdict.Rdict(
        directory, rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only()
    )
    try:
        id_map = {
            old_id: struct.pack(">H", backend._register_restored_state(meta))
            for old_id, meta in _registry_of(db).items()
        }
        lower, upper = key_group_bounds(start, end)
        read_opt = rocksdict.ReadOptions()
        read_opt.set_iterate_upper_bound(upper)

        def remapped() -> Iterator[tuple[bytes, bytes]]:
            for raw_key, value in cast(
                Iterator[tuple[bytes, bytes]], db.items(from_key=lower, read_opt=read_opt)
            ):
                new_id = id_map.get(struct.unpack_from(">H", raw_key, 2)[0])
                if new_id is None:
                    raise RestoreError(
                        f"Corrupt RocksDB checkpoint in {directory}: data of an unregistered "
                        f"state id {raw_key[2:4].hex()}"
                    )
                yield raw_key[:2] + new_id + raw_key[4:], value

        backend.local_db.write_now(remapped())
    finally:
        db.close()


def _confirmed_files(handle: IncrementalRemoteKeyedStateHandle) -> dict[str, StreamStateHandle]:
    """The base handle's shared SSTs, which later checkpoints may reference again."""
    return {
        h.local_path: h.handle
        for h in handle.shared_state
        if not isinstance(h.handle, PlaceholderStreamStateHandle)
    }


def restore_incremental(
    backend: RocksDBKeyedStateBackend, handles: Sequence[IncrementalRemoteKeyedStateHandle]
) -> None:
    """Restore ``backend`` (already emptied) from incremental handles of any old range."""
    rng = backend.key_group_range
    parts = []
    for handle in handles:
        inter = handle.key_group_range.get_intersection(rng)
        if inter.is_empty():
            continue
        meta = read_incremental_meta(handle)
        check_max_parallelism(meta.max_parallelism, backend.max_parallelism)
        parts.append((len(inter), handle, inter))
    if not parts:
        return
    parts.sort(key=lambda p: -p[0])
    _, base, _ = parts[0]
    work = os.path.join(backend.directory, f"restore-{uuid.uuid4().hex[:8]}")
    try:
        download_handle(base, work, backend.transfer_threads)
        backend.local_db.replace_with(work)
        db = backend.local_db
        db.reset_epochs()
        if rng.start_key_group > 0:
            db.delete_range_now(b"\x00\x00", struct.pack(">H", rng.start_key_group))
        db.delete_range_now(struct.pack(">H", rng.end_key_group + 1), _MAX_KEY_GROUP_BYTES)
        backend._after_incremental_restore()
        backend.bind_ledger(_confirmed_files(base), base.checkpoint_id)
        for _, handle, inter in parts[1:]:
            download_handle(handle, work, backend.transfer_threads)
            try:
                _copy_key_groups(backend, work, inter.start_key_group, inter.end_key_group)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
