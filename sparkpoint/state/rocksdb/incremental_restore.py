"""Restore of incremental RocksDB handles, with rescaling (Flink's
``RocksDBIncrementalRestoreOperation``).

The handle sharing the most key groups with the new range becomes the base: its files are
downloaded into a fresh directory that replaces the local database, and key groups outside
the range are dropped with range deletes (Flink does the same with ``deleteRange``). Every
other intersecting handle is downloaded, opened read-only, and the entries of the key groups
in range are copied in, with state ids mapped by state name through the registries of both
databases (a state the base does not know is registered under a new id).

The operation works on the ``LocalRocksDB`` alone; the backend then adopts the result (its
registry, range record and upload ledger).
"""

from __future__ import annotations

import os
import shutil
import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import rocksdict

from sparkpoint.checkpoint.handles import (
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.errors import RestoreError
from sparkpoint.state.key_groups import check_max_parallelism
from sparkpoint.state.rocksdb.incremental import download_handle, read_incremental_meta
from sparkpoint.state.rocksdb.local_db import LocalRocksDB, key_group_bounds
from sparkpoint.state.rocksdb.registry import (
    RegisteredState,
    next_state_id,
    read_registry,
    registry_record,
)

__all__ = ["IncrementalRestoreOperation", "IncrementalRestoreResult"]

_MAX_KEY_GROUP_BYTES = b"\x80\x00"


@dataclass(frozen=True)
class IncrementalRestoreResult:
    """What a restore put in place: the checkpoint of the base handle and the shared SSTs it
    uploaded, which later incremental checkpoints may reference again."""

    checkpoint_id: int
    confirmed_files: dict[str, StreamStateHandle]


class IncrementalRestoreOperation:
    """Fills ``db`` with the key groups of ``key_group_range`` from incremental handles."""

    def __init__(
        self,
        db: LocalRocksDB,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        work_dir: str,
        transfer_threads: int,
    ) -> None:
        self.db = db
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.work_dir = work_dir
        self.transfer_threads = transfer_threads

    def restore(
        self, handles: Sequence[IncrementalRemoteKeyedStateHandle]
    ) -> IncrementalRestoreResult | None:
        """Replace the database by the state of ``handles`` in our range (its epoch marker
        cleared); ``None``, with the database untouched, when no handle intersects it."""
        rng = self.key_group_range
        parts = []
        for handle in handles:
            inter = handle.key_group_range.get_intersection(rng)
            if inter.is_empty():
                continue
            meta = read_incremental_meta(handle)
            check_max_parallelism(meta.max_parallelism, self.max_parallelism)
            parts.append((len(inter), handle, inter))
        if not parts:
            return None
        parts.sort(key=lambda p: -p[0])
        _, base, _ = parts[0]
        work = os.path.join(self.work_dir, f"restore-{uuid.uuid4().hex[:8]}")
        try:
            download_handle(base, work, self.transfer_threads)
            db = self.db
            db.replace_with(work)
            db.reset_epochs()
            if rng.start_key_group > 0:
                db.delete_range_now(b"\x00\x00", struct.pack(">H", rng.start_key_group))
            db.delete_range_now(struct.pack(">H", rng.end_key_group + 1), _MAX_KEY_GROUP_BYTES)
            for _, handle, inter in parts[1:]:
                download_handle(handle, work, self.transfer_threads)
                try:
                    self._copy_key_groups(work, inter.start_key_group, inter.end_key_group)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return IncrementalRestoreResult(base.checkpoint_id, _confirmed_files(base))

    def _copy_key_groups(self, directory: str, start: int, end: int) -> None:
        """Copy key groups ``start..end`` of the database in ``directory`` into ours."""
        source = rocksdict.Rdict(
            directory,
            rocksdict.Options(raw_mode=True),
            access_type=rocksdict.AccessType.read_only(),
        )
        try:
            id_map = self._map_state_ids(read_registry(source))
            lower, upper = key_group_bounds(start, end)
            read_opt = rocksdict.ReadOptions()
            read_opt.set_iterate_upper_bound(upper)

            def remapped() -> Iterator[tuple[bytes, bytes]]:
                for raw_key, value in cast(
                    Iterator[tuple[bytes, bytes]],
                    source.items(from_key=lower, read_opt=read_opt),
                ):
                    new_id = id_map.get(struct.unpack_from(">H", raw_key, 2)[0])
                    if new_id is None:
                        raise RestoreError(
                            f"Corrupt RocksDB checkpoint in {directory}: data of an "
                            f"unregistered state id {raw_key[2:4].hex()}"
                        )
                    yield raw_key[:2] + new_id + raw_key[4:], value

            self.db.write_now(remapped())
        finally:
            source.close()

    def _map_state_ids(self, theirs: dict[str, RegisteredState]) -> dict[int, bytes]:
        """Their state id -> our state id (2 bytes), by state name; states we do not know
        yet are registered in our database under new ids."""
        ours = read_registry(self.db.db)
        used = {r.state_id for r in ours.values()}
        out: dict[int, bytes] = {}
        for name, their in theirs.items():
            known = ours.get(name)
            if known is not None:
                known.meta.check_restored_layout(their.meta)
                if known.layout != their.layout:
                    raise RestoreError(
                        f"State {name!r} is stored in the {known.layout or 'standard'} layout "
                        f"in one restored RocksDB handle and in the "
                        f"{their.layout or 'standard'} layout in another"
                    )
                our_id = known.state_id
            else:
                our_id = next_state_id(used)
                used.add(our_id)
                self.db.db.put(*registry_record(our_id, their.meta, their.layout))
            out[their.state_id] = struct.pack(">H", our_id)
        return out


def _confirmed_files(handle: IncrementalRemoteKeyedStateHandle) -> dict[str, StreamStateHandle]:
    """The base handle's shared SSTs, which later checkpoints may reference again."""
    return {
        h.local_path: h.handle
        for h in handle.shared_state
        if not isinstance(h.handle, PlaceholderStreamStateHandle)
    }
