"""The local RocksDB of one keyed subtask: key layout, epoch commits with one-step undo, and a
read-your-writes cache of the current epoch's writes.

Key layout (raw bytes, so key-group iteration is a range scan):

* state data: ``key_group (2 bytes, big endian) + state_id (2 bytes) + rest``
* meta data: ``0xFF`` + tag (key groups never exceed 0x7FFF, so meta sorts after all data)

Writes of an epoch stay in memory (a write-back cache: one final value per key) until
``commit`` writes them, the epoch marker and the extra bytes in one ``WriteBatch``: the local
state is always at an epoch boundary. Before it writes, ``commit`` takes a RocksDB checkpoint
of the state it replaces (``<path>.undo``: hard links to the SST files; a memtable still
holding earlier writes is flushed to a new file first), so ``revert`` can undo the last
commit once by putting that copy back (a task retried by Spark never applies an epoch
twice). The undo costs no write per key and no read of old values.

Committed values read during the epoch are kept (a read cache: committed data does not
change within an epoch), so ``prefetch`` can read a batch's keys before the records that
need them run.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import shutil
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import rocksdict

from sparkpoint.errors import CorruptStateError, StateLostError
from sparkpoint.state.rocksdb.bulk_load import BulkLoader

__all__ = [
    "REGISTRY_END",
    "REGISTRY_PREFIX",
    "LocalRocksDB",
    "corrupt_checkpoint",
    "data_prefix",
    "key_group_bounds",
    "prefix_upper_bound",
]

REGISTRY_PREFIX = b"\xff\x02"
"""Registered states: ``REGISTRY_PREFIX + name`` -> JSON ``{"id": state id, "meta": ...}``."""
REGISTRY_END = b"\xff\x03"
_EPOCH_KEY = b"\xff\x00epoch"
_EXTRA_KEY = b"\xff\x00extra"
# Undo records of earlier versions (only ever deleted now): one record, and per-key ones.
_LEGACY_UNDO = (b"\xff\x00undo-record", b"\xff\x00undo", b"\xff\x01", b"\xff\x02")
_UNREAD = object()  # read-cache miss (``None`` is a cached absent key)
# ``prefetch`` scans while it passes at most this many unwanted entries per wanted one
# (plus ``_SCAN_MIN_KEYS``), and only for at least ``_SCAN_MIN_KEYS`` keys.
_SCAN_SLACK = 3
_SCAN_MIN_KEYS = 64
# Keys per multi-get: one multi-get of this many sorted keys cost 25-60% less per key than
# point gets (rocksdict 0.3.29, 1M-5M keys); one of 100,000 keys cost more than chunks.
_MULTI_GET_KEYS = 1000
_OPEN_RETRY_SECONDS = 10.0
_LOG = logging.getLogger(__name__)


def _corrupt(exc: Exception, path: str) -> Exception:
    """What to raise for ``exc`` raised reading the database at ``path``: RocksDB's own
    errors (plain ``Exception``: a corrupt block) as ``CorruptStateError``, others as
    they are."""
    if type(exc) is not Exception:
        return exc
    return CorruptStateError(f"Corrupt RocksDB state in {path}: {exc}")


def corrupt_checkpoint(exc: BaseException, where: str) -> CorruptStateError | None:
    """``CorruptStateError`` naming ``where`` for an error RocksDB raised reading restored
    files (rocksdict raises plain ``Exception``: "Corruption: block checksum mismatch"...),
    else None."""
    if type(exc) is not Exception:
        return None
    return CorruptStateError(f"Corrupt RocksDB checkpoint {where}: {exc}")


def data_prefix(key_group: int, state_id: int) -> bytes:
    """The 4-byte prefix of every entry of ``state_id`` in ``key_group``."""
    return struct.pack(">HH", key_group, state_id)


def key_group_bounds(start_key_group: int, end_key_group: int) -> tuple[bytes, bytes]:
    """``[lower, upper)`` byte bounds of all data in key groups ``start..end`` (inclusive)."""
    return struct.pack(">H", start_key_group), struct.pack(">H", end_key_group + 1)


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _raw_iter(
    db: rocksdict.Rdict, lower: bytes, upper: bytes | None
) -> Iterator[tuple[bytes, bytes]]:
    """Committed entries of ``db`` in ``[lower, upper)``, in key order (one pinned view).

    A generator, so that ``upper`` lives as long as the iteration: rocksdict's read options
    point into the bound's buffer without keeping the bytes object alive (a temporary bound
    freed early made iterations stop after a few entries)."""
    read_opt = rocksdict.ReadOptions()
    if upper is not None:
        read_opt.set_iterate_upper_bound(upper)
    yield from cast(Iterator[tuple[bytes, bytes]], db.items(from_key=lower, read_opt=read_opt))


class LocalRocksDB:
    """One RocksDB directory opened read-write, with pending writes and epoch commits.

    Not thread-safe: one task thread uses it (snapshot upload threads only read checkpoints).
    """

    def __init__(self, path: str, options_factory: Callable[[], rocksdict.Options]) -> None:
        self.path = path
        self.undo_path = path + ".undo"  # the state before the last commit
        self._options_factory = options_factory
        self._pending: dict[bytes, bytes | None] = {}
        self._sorted: list[bytes] = []
        self._unsorted: list[bytes] = []
        # committed value (None: absent) of every key read this epoch
        self._reads: dict[bytes, bytes | None] = {}
        # ranges deleted whole this epoch, and the pending deletes they cover
        self._ranges: list[tuple[bytes, bytes]] = []
        self._ranged: set[bytes] = set()
        self._unflushed_bulk = False
        self._bulk: BulkLoader | None = None
        self._db: rocksdict.Rdict | None = None
        self._db = self._open(path)

    # -- lifecycle ---------------------------------------------------------------------

    def _open(self, path: str, restored: bool = False) -> rocksdict.Rdict:
        """Open ``path`` read-write, waiting briefly while another process still holds it.

        A database that cannot be opened for another reason (corrupt, half-deleted) is only
        a cache of checkpointed state: it is deleted and recreated empty, so its missing
        epoch marker tells the runtime to restore. A ``restored`` one (the files of a
        checkpoint) is not: it raises ``CorruptStateError`` and stays closed.
        """
        os.makedirs(path, exist_ok=True)
        opts = self._options_factory()
        deadline = time.monotonic() + _OPEN_RETRY_SECONDS
        recreated = False
        while True:
            try:
                return rocksdict.Rdict(path, opts, column_families={"default": opts})
            except Exception as exc:
                # "While lock file: .../LOCK: Resource temporarily unavailable", "lock hold by
                # current process ...: .../LOCK: ..." (not the "block" of "block checksum")
                locked = "/LOCK" in str(exc) or "lock file" in str(exc).lower()
                if locked and time.monotonic() <= deadline:
                    time.sleep(0.1)
                    continue
                if restored and not locked:
                    raise CorruptStateError(
                        f"The RocksDB checkpoint restored into {path} cannot be opened: {exc}"
                    ) from None
                if locked or recreated:
                    raise StateLostError(f"Cannot open the local RocksDB at {path}: {exc}") from exc
                _LOG.warning("Local RocksDB at %s is unusable (%s); starting empty", path, exc)
                shutil.rmtree(path, ignore_errors=True)
                os.makedirs(path, exist_ok=True)
                recreated = True

    @property
    def db(self) -> rocksdict.Rdict:
        """The open rocksdict handle."""
        if self._db is None:
            raise StateLostError(f"The local RocksDB at {self.path} is closed")
        return self._db

    def close(self) -> None:
        """Close the database (pending writes are dropped; committed data stays on disk)."""
        self._clear_pending()
        if self._db is not None:
            self.flush_bulk_writes()
            self._db.close()
            self._db = None

    def replace_with(self, directory: str) -> None:
        """Close, replace the database directory by ``directory`` (moved) and reopen."""
        self.close()
        shutil.rmtree(self.undo_path, ignore_errors=True)
        shutil.rmtree(self.path, ignore_errors=True)
        os.replace(directory, self.path)
        self._db = self._open(self.path, restored=True)

    def wipe(self) -> None:
        """Delete every entry (data, meta, undo) and start empty."""
        self.close()
        shutil.rmtree(self.undo_path, ignore_errors=True)
        shutil.rmtree(self.path, ignore_errors=True)
        self._db = self._open(self.path)

    def destroy(self) -> None:
        """Close and delete the database directory."""
        self.close()
        shutil.rmtree(self.undo_path, ignore_errors=True)
        shutil.rmtree(self.path, ignore_errors=True)

    # -- reads and writes of the current epoch ------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` including this epoch's pending writes."""
        if key in self._pending:
            return self._pending[key]
        value = self._reads.get(key, _UNREAD)
        if value is _UNREAD:
            try:
                value = self._reads[key] = self.db.get(key)
            except Exception as exc:
                raise _corrupt(exc, self.path) from None
        return cast(bytes | None, value)

    def prefetch(self, keys: Iterable[bytes]) -> None:
        """Read the committed values of ``keys`` not read or written yet this epoch, so that
        the ``get``s that follow are cache hits. In key order: while the keys are dense in
        the database (most entries passed are wanted) one ordered scan reads them (~5x
        cheaper per entry than a point get), then multi-gets of sorted chunks read the rest
        (neighbouring keys share blocks)."""
        pending, reads = self._pending, self._reads
        self._read_committed(sorted({k for k in keys if k not in reads and k not in pending}))

    def _read_committed(self, missing: list[bytes]) -> None:
        """Read the committed values of the sorted keys ``missing`` into the read cache."""
        try:
            self._read_committed_now(missing)
        except Exception as exc:
            raise _corrupt(exc, self.path) from None

    def _read_committed_now(self, missing: list[bytes]) -> None:
        if not missing:
            return
        reads = self._reads
        done = 0
        if len(missing) >= _SCAN_MIN_KEYS:
            n = len(missing)
            passed = 0
            for key, value in _raw_iter(self.db, missing[0], missing[-1] + b"\x00"):
                while missing[done] < key:  # not in the database
                    reads[missing[done]] = None
                    done += 1
                if missing[done] == key:
                    reads[key] = value
                    done += 1
                    if done == n:
                        break
                else:
                    passed += 1
                    if passed > _SCAN_SLACK * done + _SCAN_MIN_KEYS:
                        break  # sparse: point gets are cheaper from here
            else:
                for key in missing[done:]:  # after the last entry scanned
                    reads[key] = None
                return
        get = self.db.get
        for start in range(done, len(missing), _MULTI_GET_KEYS):
            chunk = missing[start : start + _MULTI_GET_KEYS]
            # a list of keys gets a list of values (None: absent)
            values = cast(list[bytes | None], get(cast(Any, chunk)))
            reads.update(zip(chunk, values))

    def put(self, key: bytes, value: bytes) -> None:
        """Write ``key`` in the current epoch."""
        if key not in self._pending:
            self._unsorted.append(key)
        self._pending[key] = value

    def delete(self, key: bytes) -> None:
        """Delete ``key`` in the current epoch."""
        if key not in self._pending:
            self._unsorted.append(key)
        self._pending[key] = None

    def delete_scanned(self, keys: Iterable[bytes]) -> None:
        """Delete keys just read by ``scan`` (one pass, no lookup)."""
        pending = self._pending
        unsorted = self._unsorted
        for key in keys:
            if key not in pending:
                unsorted.append(key)
            pending[key] = None

    def delete_ranges(self, ranges: Iterable[tuple[bytes, bytes, list[bytes]]]) -> None:
        """Delete ranges ``[lower, upper)`` whose keys were all just read by ``scan`` (listed
        with each range): the commit writes one range deletion instead of a delete per key
        (reads of the epoch see each key deleted)."""
        for lower, upper, keys in ranges:
            if keys:
                self.delete_scanned(keys)
                self._ranges.append((lower, upper))
                self._ranged.update(keys)

    @property
    def pending_writes(self) -> dict[bytes, bytes | None]:
        """This epoch's writes (None = delete); the dict object lives as long as the DB."""
        return self._pending

    @property
    def committed_reads(self) -> dict[bytes, bytes | None]:
        """Committed values read this epoch (None = absent); lives as long as the DB."""
        return self._reads

    def has_pending(self) -> bool:
        """Whether there are uncommitted writes."""
        return bool(self._pending)

    def _clear_pending(self) -> None:
        self._pending.clear()
        self._reads.clear()
        self._ranges.clear()
        self._ranged.clear()
        self._sorted.clear()
        self._unsorted.clear()

    def _pending_keys_in(self, lower: bytes, upper: bytes | None) -> list[bytes]:
        """Pending keys in ``[lower, upper)``, sorted (the sort is kept between calls)."""
        if self._unsorted:
            if len(self._unsorted) * 8 < len(self._sorted):
                for key in self._unsorted:
                    bisect.insort(self._sorted, key)
            else:
                self._sorted.extend(self._unsorted)
                self._sorted.sort()
            self._unsorted.clear()
        lo = bisect.bisect_left(self._sorted, lower)
        hi = len(self._sorted) if upper is None else bisect.bisect_left(self._sorted, upper)
        return self._sorted[lo:hi]

    def scan(self, lower: bytes, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """Entries in ``[lower, upper)`` in key order, pending writes applied (snapshot of the
        pending keys at call time; do not write while iterating)."""
        committed = _raw_iter(self.db, lower, upper)
        pending_keys = self._pending_keys_in(lower, upper)
        if not pending_keys:
            yield from committed
            return
        pending = [(k, self._pending[k]) for k in pending_keys]
        yield from _merge(committed, pending)

    def committed_entries(self, lower: bytes, upper: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Committed entries in ``[lower, upper)`` in key order, without pending writes."""
        return _raw_iter(self.db, lower, upper)

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries whose key starts with ``prefix``, pending writes applied."""
        return self.scan(prefix, prefix_upper_bound(prefix))

    def forget_reads(self) -> None:
        """Committed data changed outside an epoch: values read before may be stale."""
        self._reads.clear()

    def delete_range_now(self, lower: bytes, upper: bytes) -> None:
        """Delete committed data in ``[lower, upper)`` immediately (restore-time only)."""
        self.forget_reads()
        batch = rocksdict.WriteBatch(raw_mode=True)
        batch.delete_range(lower, upper)
        self.db.write(batch)

    @contextlib.contextmanager
    def bulk_load(self, directory: str) -> Iterator[None]:
        """Within the block, ``write_now`` goes to SST files ingested at its end (restore)."""
        self._bulk = BulkLoader(directory, self._options_factory, self._ingest)
        try:
            yield
        except BaseException:
            self._bulk.abort()
            raise
        else:
            self._bulk.finish()
        finally:
            self._bulk = None

    def _ingest(self, path: str) -> None:
        opts = rocksdict.IngestExternalFileOptions()
        opts.set_move_files(True)
        self.db.ingest_external_file([path], opts)

    def write_now(self, items: Iterable[tuple[bytes, bytes]], batch_bytes: int = 4 << 20) -> int:
        """Write entries directly, bypassing epochs (restore-time bulk load); returns count."""
        self.forget_reads()
        if self._bulk is not None:
            return self._bulk.add(items)
        count = 0
        size = 0
        db = self.db
        no_wal = rocksdict.WriteOptions()
        setattr(no_wal, "disable_wal", True)  # noqa: B010 - a property; the stub says method
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in items:
            batch.put(key, value)
            count += 1
            size += len(key) + len(value)
            if size >= batch_bytes:
                db.write(batch, no_wal)
                batch = rocksdict.WriteBatch(raw_mode=True)
                size = 0
        if size:
            db.write(batch, no_wal)
        self._unflushed_bulk = True
        return count

    def flush_bulk_writes(self) -> None:
        """Flush memtables after bulk writes made without the write-ahead log."""
        if self._unflushed_bulk:
            self.db.flush()
            self._unflushed_bulk = False

    def flush_pending_now(self) -> None:
        """Write pending writes without marker or undo checkpoint (restore-time only)."""
        if self._pending:
            self._write_pending()

    def _write_pending(self) -> None:
        """Write every pending write in one ``WriteBatch`` and forget them (range deletions
        first: a key written again after its range was deleted is put after it)."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        for lower, upper in self._ranges:
            batch.delete_range(lower, upper)
        ranged = self._ranged
        for key, value in self._pending.items():
            if value is None:
                if key not in ranged:
                    batch.delete(key)
            else:
                batch.put(key, value)
        self.db.write(batch)
        self._clear_pending()

    # -- epochs -----------------------------------------------------------------------

    def local_epoch(self) -> int | None:
        """The epoch of the last commit (None if never committed)."""
        raw = self.db.get(_EPOCH_KEY)
        return None if raw is None else _decode_epoch(raw)

    def local_extra(self) -> bytes:
        """The extra bytes of the last commit."""
        raw = self.db.get(_EXTRA_KEY)
        return b"" if raw is None else bytes(raw)

    def commit(self, epoch: int, extra: bytes) -> None:
        """Atomically write pending writes, marker and extra, after keeping the state they
        replace as the undo checkpoint (only a committed epoch can be returned to)."""
        if self.local_epoch() is None:
            shutil.rmtree(self.undo_path, ignore_errors=True)
        else:
            self.create_checkpoint(self.undo_path)
        self._pending[_EPOCH_KEY] = _encode_epoch(epoch)
        self._pending[_EXTRA_KEY] = bytes(extra)
        self._write_pending()

    def revert(self, epoch: int) -> bool:
        """Drop pending writes; undo the last commit if that leads back to ``epoch`` (the
        database directory is replaced by the undo checkpoint and reopened)."""
        self._clear_pending()
        if self.local_epoch() == epoch:
            return True
        if _epoch_of(self.undo_path) != epoch:
            return False
        self.close()
        aside = f"{self.path}.reverted-{uuid.uuid4().hex[:8]}"
        os.replace(self.path, aside)
        os.replace(self.undo_path, self.path)
        shutil.rmtree(aside, ignore_errors=True)
        self._db = self._open(self.path)
        return True

    def reset_epochs(self) -> None:
        """Forget the marker, extra and undo state (after a restore replaced the state)."""
        self._clear_pending()
        shutil.rmtree(self.undo_path, ignore_errors=True)
        batch = rocksdict.WriteBatch(raw_mode=True)
        batch.delete(_LEGACY_UNDO[0])
        batch.delete(_LEGACY_UNDO[1])
        batch.delete_range(_LEGACY_UNDO[2], _LEGACY_UNDO[3])
        batch.delete(_EPOCH_KEY)
        batch.delete(_EXTRA_KEY)
        self.db.write(batch)

    def create_checkpoint(self, directory: str) -> None:
        """A consistent copy of the committed state in ``directory`` (SSTs are hard links)."""
        if os.path.exists(directory):
            shutil.rmtree(directory)
        os.makedirs(os.path.dirname(directory) or ".", exist_ok=True)
        rocksdict.Checkpoint(self.db).create_checkpoint(directory)


def _epoch_of(directory: str) -> int | None:
    """The committed epoch of the database copy in ``directory`` (None: none, or no copy)."""
    if not os.path.isdir(directory):
        return None
    try:
        db = rocksdict.Rdict(
            directory,
            rocksdict.Options(raw_mode=True),
            access_type=rocksdict.AccessType.read_only(),
        )
    except Exception:  # a half-written copy: nothing to revert to
        return None
    try:
        raw = db.get(_EPOCH_KEY)
    finally:
        db.close()
    return None if raw is None else _decode_epoch(raw)


def _encode_epoch(epoch: int) -> bytes:
    return struct.pack(">q", epoch)


def _decode_epoch(raw: bytes) -> int:
    return int(struct.unpack(">q", raw)[0])


def _merge(
    committed: Iterator[tuple[bytes, bytes]], pending: list[tuple[bytes, bytes | None]]
) -> Iterator[tuple[bytes, bytes]]:
    """Merge committed entries with sorted pending writes (pending wins; None deletes)."""
    idx = 0
    n = len(pending)
    for key, value in committed:
        while idx < n and pending[idx][0] < key:
            pkey, pval = pending[idx]
            if pval is not None:
                yield pkey, pval
            idx += 1
        if idx < n and pending[idx][0] == key:
            pval = pending[idx][1]
            if pval is not None:
                yield key, pval
            idx += 1
        else:
            yield key, value
    while idx < n:
        pkey, pval = pending[idx]
        if pval is not None:
            yield pkey, pval
        idx += 1
