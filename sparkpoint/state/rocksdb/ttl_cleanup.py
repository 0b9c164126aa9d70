"""TTL cleanup of RocksDB state by a range scan (rocksdict exposes no compaction filter).

Flink drops expired entries in a RocksDB compaction filter. rocksdict (0.3.29) offers no
hook into compactions, so the backend scans the TTL states instead: each stored value starts
with its last-access timestamp, ``RegisteredStateMeta.drop_expired_bytes`` says what is left
of it, and one ``WriteBatch`` deletes or shortens (list state) the expired entries.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import cast

import rocksdict

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.state.rocksdb.local_db import LocalRocksDB, data_prefix, prefix_upper_bound
from sparkpoint.state.rocksdb.table import RocksDBStateTable

__all__ = ["drop_expired_entries", "last_cleanup_time"]

_TTL_CLEANUP_KEY = b"\xff\x00ttl-cleanup"


def last_cleanup_time(local: LocalRocksDB) -> int | None:
    """When (ms) the last cleanup scan ran on this database; ``None`` if never."""
    raw = local.db.get(_TTL_CLEANUP_KEY)
    return None if raw is None else int(struct.unpack(">q", bytes(raw))[0])


def drop_expired_entries(
    local: LocalRocksDB,
    states: Sequence[tuple[RocksDBStateTable, int]],
    key_group_range: KeyGroupRange,
    now: int,
) -> int:
    """Delete expired entries of ``(table, ttl ms)`` in committed state; returns how many
    entries were removed or shortened. Also records ``now`` as the last cleanup time."""
    batch = rocksdict.WriteBatch(raw_mode=True)
    changed = 0
    for table, ttl in states:
        meta = table.meta
        for kg in key_group_range:
            lower = data_prefix(kg, table.state_id)
            upper = prefix_upper_bound(lower)
            assert upper is not None
            read_opt = rocksdict.ReadOptions()
            read_opt.set_iterate_upper_bound(upper)
            entries = cast(
                Iterator[tuple[bytes, bytes]],
                local.db.items(from_key=lower, read_opt=read_opt),
            )
            for raw_key, value in entries:
                kept = meta.drop_expired_bytes(value, now, ttl)
                if kept is None:
                    batch.delete(raw_key)
                    changed += 1
                elif kept != value:
                    batch.put(raw_key, kept)
                    changed += 1
    batch.put(_TTL_CLEANUP_KEY, struct.pack(">q", now))
    local.forget_reads()
    local.db.write(batch)
    return changed
