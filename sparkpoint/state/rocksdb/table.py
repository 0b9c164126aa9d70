"""``RocksDBStateTable``: one registered state stored in the subtask's local RocksDB.

Entry keys are ``key_group (2) + state_id (2) + varint(len(key bytes)) + key bytes`` and, for
MAP state, ``+ user-key bytes``. Values are the canonical value bytes of
``RegisteredStateMeta`` (so snapshots copy bytes without decoding). LEB128 length prefixes are
prefix-free, so all map entries of one key are one contiguous prefix range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.rocksdb.local_db import LocalRocksDB, data_prefix
from sparkpoint.state.serializers import read_varint, write_varint
from sparkpoint.state.table import MISSING, RegisteredStateMeta, StateTable

__all__ = ["RocksDBStateTable", "split_entry_key"]


def split_entry_key(raw_key: bytes) -> tuple[bytes, bytes]:
    """``(key bytes, rest)`` of a data key (rest = user-key bytes for MAP, else empty)."""
    length, pos = read_varint(raw_key, 4)
    return raw_key[pos : pos + length], raw_key[pos + length :]


class RocksDBStateTable(StateTable):
    """A state table over ``LocalRocksDB`` (reads see the epoch's pending writes)."""

    def __init__(
        self,
        meta: RegisteredStateMeta,
        state_id: int,
        db: LocalRocksDB,
        key_group_range: KeyGroupRange,
    ) -> None:
        super().__init__(meta)
        self.state_id = state_id
        self._db = db
        self._range = key_group_range
        self._prefixes = {kg: data_prefix(kg, state_id) for kg in key_group_range}
        self._is_map = meta.kind is StateKind.MAP
        # int key -> its entry key, for the keys of the batch last prefetched
        self._prefetched: dict[int, bytes] = {}

    def _key_prefix(self, key_group: int, key: Any) -> bytes:
        out = bytearray(self._prefixes[key_group])
        kb = self.meta.encode_key(key)
        write_varint(len(kb), out)
        out += kb
        return bytes(out)

    def prefetch(self, key_groups: list[int], keys: list[Any]) -> None:
        """Read the entries of ``keys`` (not MAP state) before the records that touch them
        run (``LocalRocksDB.prefetch``); remembers the entry keys of int keys for
        ``value_accessors``."""
        prefixes = self._prefixes
        encode_key = self.meta.key_serializer.serialize
        # A batch of 8,192 records over 1,000 keys holds each key ~8 times: int keys are
        # encoded once each. Others are encoded per record: 1 == True == 1.0, but each type
        # has its own entry key, so a dict of them would drop some.
        ints = set(map(type, keys)) == {int}
        unique = dict(zip(keys, key_groups)) if ints else None
        raws = []
        for key, kg in unique.items() if unique is not None else zip(keys, key_groups):
            kb = encode_key(key)
            raws.append(
                prefixes[kg] + bytes((len(kb),)) + kb
                if len(kb) < 0x80
                else self._key_prefix(kg, key)
            )
        by_key = self._prefetched
        by_key.clear()
        if unique is not None:
            by_key.update(zip(unique, raws))
        self._db.prefetch(raws)

    # -- VALUE / LIST / REDUCING / AGGREGATING -----------------------------------------

    def get(self, key_group: int, key: Any) -> Any:
        raw = self._db.get(self._key_prefix(key_group, key))
        return None if raw is None else self.meta.decode_value(raw)

    def put(self, key_group: int, key: Any, stored: Any) -> None:
        self._db.put(self._key_prefix(key_group, key), self.meta.encode_value(stored))

    def delete(self, key_group: int, key: Any) -> None:
        prefix = self._key_prefix(key_group, key)
        if not self._is_map:
            self._db.delete(prefix)
            return
        for raw_key in [k for k, _ in self._db.scan_prefix(prefix)]:
            self._db.delete(raw_key)

    def append(self, key_group: int, key: Any, elements: list[Any]) -> None:
        """LIST: concatenate the canonical bytes (no decode of the existing list)."""
        db_key = self._key_prefix(key_group, key)
        current = self._db.get(db_key)
        added = self.meta.encode_value(elements)
        self._db.put(db_key, added if current is None else bytes(current) + added)

    def value_accessors(self, ctx: Any) -> tuple[Callable[[], Any], Callable[[Any], None]]:
        """Fast ``value()``/``update(v)`` of a ValueState without TTL (the hot path)."""
        prefixes = self._prefixes
        encode_key = self.meta.key_serializer.serialize
        serialize = self.meta.value_serializer.serialize
        deserialize = self.meta.decode_value  # the serializer's, its errors naming the state
        local = self._db
        last: list[Any] = [None, -1, b""]  # key object, key group, its RocksDB key
        prefetched = self._prefetched

        def db_key() -> bytes:
            key, kg = ctx.current_key, ctx.current_key_group
            if key is last[0] and kg == last[1]:
                return last[2]  # value() then update() of the same key: encode once
            raw = prefetched.get(key) if type(key) is int else None
            if raw is None:
                kb = encode_key(key)
                if len(kb) < 0x80:
                    raw = prefixes[kg] + bytes((len(kb),)) + kb
                else:
                    raw = self._key_prefix(kg, key)
            last[0], last[1], last[2] = key, kg, raw
            return raw

        pending = local.pending_writes
        reads = local.committed_reads
        get, put = local.get, local.put

        def value() -> Any:
            key = db_key()
            if key in pending:
                raw = pending[key]
            else:
                raw = reads[key] if key in reads else get(key)
            return None if raw is None else deserialize(raw)

        def update(v: Any) -> None:
            if v is None:
                local.delete(db_key())
                return
            key = db_key()
            if key in pending:
                pending[key] = serialize(v)  # not the first write of the epoch
            else:
                put(key, serialize(v))

        return value, update

    # -- MAP ---------------------------------------------------------------------------

    def map_get(self, key_group: int, key: Any, user_key: Any) -> Any:
        raw = self._db.get(self._key_prefix(key_group, key) + self.meta.encode_user_key(user_key))
        return MISSING if raw is None else self.meta.decode_value(raw)

    def map_put(self, key_group: int, key: Any, user_key: Any, stored: Any) -> None:
        self._db.put(
            self._key_prefix(key_group, key) + self.meta.encode_user_key(user_key),
            self.meta.encode_value(stored),
        )

    def map_remove(self, key_group: int, key: Any, user_key: Any) -> None:
        self._db.delete(self._key_prefix(key_group, key) + self.meta.encode_user_key(user_key))

    def map_entries(self, key_group: int, key: Any) -> list[tuple[Any, Any]]:
        prefix = self._key_prefix(key_group, key)
        n = len(prefix)
        decode_uk = self.meta.decode_user_key
        decode_v = self.meta.decode_value
        return [(decode_uk(k[n:]), decode_v(v)) for k, v in self._db.scan_prefix(prefix)]

    def map_is_empty(self, key_group: int, key: Any) -> bool:
        for _ in self._db.scan_prefix(self._key_prefix(key_group, key)):
            return False
        return True

    def pop_map_entries(
        self, key_groups: Iterable[int], select: Callable[[Any], bool]
    ) -> list[tuple[int, Any, Any]]:
        """Scan every key group first, then delete the hits (no write between scans keeps
        the pending keys' sort intact)."""
        decode_uk = self.meta.decode_user_key
        scanned: list[tuple[int, bytes, bytes, Any]] = []
        for kg in key_groups:
            prefix = self._prefixes.get(kg)
            if prefix is None:
                continue
            for raw_key, _ in self._db.scan_prefix(prefix):
                kb, ukb = split_entry_key(raw_key)
                uk = decode_uk(ukb)
                if select(uk):
                    scanned.append((kg, raw_key, kb, uk))
        self._db.delete_scanned([raw_key for _kg, raw_key, _kb, _uk in scanned])
        decode_key = self.meta.decode_key
        hits: list[tuple[int, Any, Any]] = []
        last_kb: bytes | None = None
        key: Any = None
        for kg, _raw, kb, uk in scanned:
            if kb != last_kb:
                last_kb, key = kb, decode_key(kb)
            hits.append((kg, key, uk))
        return hits

    # -- enumeration and canonical bytes -----------------------------------------------

    def keys(self) -> Iterator[Any]:
        decode = self.meta.decode_key
        for prefix in self._prefixes.values():
            last: bytes | None = None
            for raw_key, _ in self._db.scan_prefix(prefix):
                kb, _rest = split_entry_key(raw_key)
                if kb != last:
                    last = kb
                    yield decode(kb)

    def iter_entries_bytes(self, key_group: int) -> Iterator[tuple[bytes, bytes | None, bytes]]:
        prefix = self._prefixes.get(key_group)
        if prefix is None:
            return
        is_map = self._is_map
        for raw_key, value in self._db.scan_prefix(prefix):
            kb, rest = split_entry_key(raw_key)
            yield kb, (rest if is_map else None), value

    def put_entry_bytes(
        self, key_group: int, key: bytes, user_key: bytes | None, value: bytes
    ) -> None:
        self._db.put(self.entry_key(key_group, key, user_key), value)

    def put_entries_bytes(
        self,
        key_group: int,
        keys: list[bytes],
        user_keys: list[bytes | None],
        values: list[bytes],
    ) -> None:
        """Bulk restore: written to RocksDB directly (restores are not part of an epoch)."""
        prefix = data_prefix(key_group, self.state_id)
        entry_key = self.entry_key

        def entries() -> Iterator[tuple[bytes, bytes]]:
            for k, uk, v in zip(keys, user_keys, values):
                if len(k) < 0x80:  # one-byte length prefix: the common case
                    yield (prefix + bytes((len(k),)) + k + (uk or b"")), v
                else:
                    yield entry_key(key_group, k, uk), v

        self._db.write_now(entries())

    def entry_key(self, key_group: int, key: bytes, user_key: bytes | None) -> bytes:
        """The RocksDB key of an entry given in canonical bytes."""
        out = bytearray(data_prefix(key_group, self.state_id))
        write_varint(len(key), out)
        out += key
        if user_key is not None:
            out += user_key
        return bytes(out)

    def clear(self) -> None:
        for prefix in self._prefixes.values():
            for raw_key in [k for k, _ in self._db.scan_prefix(prefix)]:
                self._db.delete(raw_key)
