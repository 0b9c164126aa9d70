"""``RocksDBTimerTable``: a MAP state of timers stored in time order, as Flink's RocksDB timer
service keeps its priority queue (key group, timestamp, key).

The state is a MAP from key to ``(domain, timestamp) -> True`` (the canonical bytes of
snapshots and savepoints are those of any MAP state), but its RocksDB entries are

    ``key_group (2) + state_id (2) + domain (1) + timestamp (8, big endian, offset by 2**63)
    + key bytes``  ->  the canonical value bytes (of ``True``)

so the due timers of a key group are one bounded range scan in timestamp order, and an
epoch in which few timers are due reads only those. Entry keys are converted to and from
the canonical MAP rows when snapshots are written and restored (``TimerCodec``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.state.rocksdb.local_db import LocalRocksDB, data_prefix
from sparkpoint.state.rocksdb.table import RocksDBStateTable
from sparkpoint.state.table import MISSING, RegisteredStateMeta

__all__ = ["TIMER_LAYOUT", "RocksDBTimerTable", "TimerCodec"]

TIMER_LAYOUT = "timers"
"""The registry's name for this layout (states without one use ``RocksDBStateTable``'s)."""

_TS = struct.Struct(">Q")
_OFFSET = 1 << 63
_HEADER = 4 + 1 + 8  # prefix, domain, timestamp
_MEMO_LIMIT = 1 << 16


def timer_suffix(domain: int, timestamp: int) -> bytes:
    """The domain and timestamp bytes that follow the data prefix (order = time order)."""
    return bytes((domain,)) + _TS.pack(timestamp + _OFFSET)


class TimerCodec:
    """Entry keys of the timer layout <-> canonical MAP rows (key, user key, value bytes)."""

    def __init__(self, meta: RegisteredStateMeta) -> None:
        self.meta = meta
        self.true_bytes = meta.encode_value(True)
        self._user_key_bytes: dict[tuple[int, int], bytes] = {}
        self._user_keys: dict[bytes, tuple[int, int]] = {}

    def user_key_bytes(self, domain: int, timestamp: int) -> bytes:
        """Canonical user-key bytes of ``(domain, timestamp)`` (memoised: timers share times)."""
        memo = self._user_key_bytes
        out = memo.get((domain, timestamp))
        if out is None:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            out = memo[(domain, timestamp)] = self.meta.encode_user_key((domain, timestamp))
        return out

    def user_key(self, raw: bytes) -> tuple[int, int]:
        """``(domain, timestamp)`` of canonical user-key bytes."""
        memo = self._user_keys
        out = memo.get(raw)
        if out is None:
            domain, timestamp = self.meta.decode_user_key(raw)
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            out = memo[raw] = (int(domain), int(timestamp))
        return out

    @staticmethod
    def split(raw_key: bytes) -> tuple[bytes, int, int]:
        """``(key bytes, domain, timestamp)`` of an entry key of the timer layout."""
        return raw_key[_HEADER:], raw_key[4], _TS.unpack_from(raw_key, 5)[0] - _OFFSET

    def row(self, raw_key: bytes, value: bytes) -> tuple[bytes, bytes, bytes]:
        """The canonical ``(key bytes, user-key bytes, value bytes)`` of an entry."""
        kb, domain, timestamp = self.split(raw_key)
        return kb, self.user_key_bytes(domain, timestamp), value

    def entry_key(self, prefix: bytes, key_bytes: bytes, user_key_bytes: bytes) -> bytes:
        """The entry key of a canonical row under the data ``prefix`` of its key group."""
        return prefix + timer_suffix(*self.user_key(user_key_bytes)) + key_bytes


class RocksDBTimerTable(RocksDBStateTable):
    """The timers MAP state over ``LocalRocksDB`` in time order (see the module docstring)."""

    def __init__(
        self,
        meta: RegisteredStateMeta,
        state_id: int,
        db: LocalRocksDB,
        key_group_range: KeyGroupRange,
    ) -> None:
        super().__init__(meta, state_id, db, key_group_range)
        self.codec = TimerCodec(meta)

    def _entry(self, key_group: int, key: Any, user_key: Any) -> bytes:
        domain, timestamp = user_key
        return (
            self._prefixes[key_group]
            + timer_suffix(int(domain), int(timestamp))
            + self.meta.encode_key(key)
        )

    def _entries_of(self, key_group: int, key: Any) -> list[tuple[bytes, int, int]]:
        """``(entry key, domain, timestamp)`` of every timer of ``key`` (a key-group scan)."""
        kb = self.meta.encode_key(key)
        out = []
        for raw_key, _ in self._db.scan_prefix(self._prefixes[key_group]):
            if raw_key[_HEADER:] == kb:
                _kb, domain, timestamp = TimerCodec.split(raw_key)
                out.append((raw_key, domain, timestamp))
        return out

    # -- MAP -----------------------------------------------------------------------------

    def map_get(self, key_group: int, key: Any, user_key: Any) -> Any:
        raw = self._db.get(self._entry(key_group, key, user_key))
        return MISSING if raw is None else True

    def map_put(self, key_group: int, key: Any, user_key: Any, stored: Any) -> None:
        self._db.put(self._entry(key_group, key, user_key), self.codec.true_bytes)

    def map_remove(self, key_group: int, key: Any, user_key: Any) -> None:
        self._db.delete(self._entry(key_group, key, user_key))

    def map_entries(self, key_group: int, key: Any) -> list[tuple[Any, Any]]:
        return [((domain, ts), True) for _raw, domain, ts in self._entries_of(key_group, key)]

    def map_is_empty(self, key_group: int, key: Any) -> bool:
        return not self._entries_of(key_group, key)

    def delete(self, key_group: int, key: Any) -> None:
        for raw_key, _domain, _ts in self._entries_of(key_group, key):
            self._db.delete(raw_key)

    def pop_due(
        self, key_groups: Iterable[int], limits: tuple[int, int]
    ) -> tuple[list[tuple[int, int, Any, int]], list[int | None]]:
        """Remove every timer at or before ``limits[domain]``; returns ``(timestamp, domain,
        key, key group)`` of each (per key group in time order) and the earliest remaining
        timestamp per domain (``None``: none left). One bounded scan per key group and
        domain, then one seek past it; each scanned range is deleted whole, after every
        scan."""
        decode_key = self.meta.decode_key
        unpack = _TS.unpack_from
        db = self._db
        hits: list[tuple[int, int, Any, int]] = []
        scanned: list[tuple[bytes, bytes, list[bytes]]] = []
        earliest: list[int | None] = [None, None]
        for kg in key_groups:
            prefix = self._prefixes.get(kg)
            if prefix is None:
                continue
            for domain in (0, 1):
                start = prefix + bytes((domain,))
                end = prefix + bytes((domain + 1,))
                limit = limits[domain] + _OFFSET + 1
                due_end = start + _TS.pack(limit) if limit < 1 << 64 else end
                keys: list[bytes] = []
                for raw_key, _ in db.scan(start, due_end):
                    hits.append(
                        (unpack(raw_key, 5)[0] - _OFFSET, domain, decode_key(raw_key[_HEADER:]), kg)
                    )
                    keys.append(raw_key)
                scanned.append((start, due_end, keys))
                if due_end != end:
                    for raw_key, _ in db.scan(due_end, end):
                        timestamp = _TS.unpack_from(raw_key, 5)[0] - _OFFSET
                        first = earliest[domain]
                        if first is None or timestamp < first:
                            earliest[domain] = timestamp
                        break
        db.delete_ranges(scanned)
        return hits, earliest

    def pop_map_entries(
        self, key_groups: Iterable[int], select: Callable[[Any], bool]
    ) -> list[tuple[int, Any, Any]]:
        decode_key = self.meta.decode_key
        selected: list[tuple[int, bytes, tuple[int, int]]] = []
        for kg in key_groups:
            prefix = self._prefixes.get(kg)
            if prefix is None:
                continue
            for raw_key, _ in self._db.scan_prefix(prefix):
                _kb, domain, timestamp = TimerCodec.split(raw_key)
                if select((domain, timestamp)):
                    selected.append((kg, raw_key, (domain, timestamp)))
        self._db.delete_scanned([raw_key for _kg, raw_key, _uk in selected])
        return [(kg, decode_key(raw_key[_HEADER:]), uk) for kg, raw_key, uk in selected]

    # -- enumeration and canonical bytes -------------------------------------------------

    def keys(self) -> Iterator[Any]:
        decode = self.meta.decode_key
        seen: set[bytes] = set()
        for prefix in self._prefixes.values():
            for raw_key, _ in self._db.scan_prefix(prefix):
                kb = raw_key[_HEADER:]
                if kb not in seen:
                    seen.add(kb)
                    yield decode(kb)

    def iter_entries_bytes(self, key_group: int) -> Iterator[tuple[bytes, bytes | None, bytes]]:
        prefix = self._prefixes.get(key_group)
        if prefix is None:
            return
        row = self.codec.row
        for raw_key, value in self._db.scan_prefix(prefix):
            yield row(raw_key, value)

    def put_entries_bytes(
        self,
        key_group: int,
        keys: list[bytes],
        user_keys: list[bytes | None],
        values: list[bytes],
    ) -> None:
        """Bulk restore: written to RocksDB directly (restores are not part of an epoch)."""
        prefix = data_prefix(key_group, self.state_id)
        entry_key = self.codec.entry_key
        self._db.write_now(
            (entry_key(prefix, k, uk or b""), v) for k, uk, v in zip(keys, user_keys, values)
        )

    def entry_key(self, key_group: int, key: bytes, user_key: bytes | None) -> bytes:
        if user_key is None:
            raise ValueError("A timer entry needs its (domain, timestamp) user key")
        return self.codec.entry_key(data_prefix(key_group, self.state_id), key, user_key)
