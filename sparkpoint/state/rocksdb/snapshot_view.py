"""The synchronous part of a full RocksDB snapshot: a local checkpoint read as columns.

``create_checkpoint`` hard-links the live SST files into a directory (milliseconds); the
upload step opens that directory read-only and reads each state's entries per key group, so
the live database keeps taking updates while the snapshot is written.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import cast

import rocksdict

from sparkpoint.state.keyed_backend import SnapshotView
from sparkpoint.state.rocksdb.local_db import data_prefix, prefix_upper_bound
from sparkpoint.state.rocksdb.table import split_entry_key
from sparkpoint.state.rocksdb.timer_table import TimerCodec
from sparkpoint.state.snapshot_format import Columns

__all__ = ["CheckpointSnapshotView"]

_READAHEAD = 4 << 20


class CheckpointSnapshotView(SnapshotView):
    """Columns read from a local RocksDB checkpoint (a consistent, hard-linked copy)."""

    def __init__(
        self,
        directory: str,
        state_ids: list[int],
        is_map: list[bool],
        timer_codecs: list[TimerCodec | None],
    ) -> None:
        self._dir = directory
        self._state_ids = state_ids
        self._is_map = is_map
        self._timer_codecs = timer_codecs  # per state: its codec if in the timer layout
        self._db: rocksdict.Rdict | None = None

    def _open(self) -> rocksdict.Rdict:
        if self._db is None:
            self._db = rocksdict.Rdict(
                self._dir,
                rocksdict.Options(raw_mode=True),
                access_type=rocksdict.AccessType.read_only(),
            )
        return self._db

    def columns(self, state_id: int, key_group: int) -> Columns | None:
        prefix = data_prefix(key_group, self._state_ids[state_id])
        read_opt = rocksdict.ReadOptions()
        upper = prefix_upper_bound(prefix)
        assert upper is not None
        read_opt.set_iterate_upper_bound(upper)
        read_opt.set_readahead_size(_READAHEAD)
        # A one-off bulk scan must not evict the working set (the stub lacks the argument).
        read_opt.fill_cache(False)  # type: ignore[call-arg]
        entries = cast(
            Iterator[tuple[bytes, bytes]], self._open().items(from_key=prefix, read_opt=read_opt)
        )
        keys: list[bytes] = []
        values: list[bytes] = []
        add_key, add_value = keys.append, values.append
        codec = self._timer_codecs[state_id]
        if codec is not None:
            rows = [codec.row(raw_key, value) for raw_key, value in entries]
            if not rows:
                return None
            return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
        if self._is_map[state_id]:
            user_keys: list[bytes] = []
            add_uk = user_keys.append
            for raw_key, value in entries:
                kb, rest = split_entry_key(raw_key)
                add_key(kb)
                add_uk(rest)
                add_value(value)
            return (keys, user_keys, values) if keys else None
        for raw_key, value in entries:
            n = raw_key[4]
            # one-byte length prefix (keys < 128 bytes): the common case, no varint decoding
            add_key(raw_key[5 : 5 + n] if n < 0x80 else split_entry_key(raw_key)[0])
            add_value(value)
        return (keys, None, values) if keys else None

    def release(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        shutil.rmtree(self._dir, ignore_errors=True)
