"""``RocksDBKeyedStateBackend``: the keyed state of one subtask in a local RocksDB (rocksdict).

One database per subtask under ``<local dir>/job_<job>/op_<operator>/subtask_<i>/db`` (the
local dir is one of the configured ``db_storage_paths``, chosen stably per subtask, or the
parameters' ``local_dir``). The database remembers the max parallelism and key-group range it
was created for; opened for another range it is wiped (the runtime then restores).

Epoch writes stay in a read-your-writes cache until ``commit_local`` writes them with the
marker in one ``WriteBatch`` (``LocalRocksDB``). Snapshots cover committed state only.
Checkpoints are full key-groups snapshots or, when enabled, incremental (``incremental.py``,
restored by ``incremental_restore.py``); savepoints are always the canonical format. TTL:
rocksdict has no compaction-filter hook, so where the RocksDB compaction-filter cleanup is
configured (Flink's default), expired entries are removed by a range scan during a
snapshot's synchronous part, at most once per shortest TTL, and by
``cleanup_expired_state``; reads never return expired entries either way.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import uuid
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.checkpoint.handles import (
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    StreamStateHandle,
    describe_stream,
)
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.config import RocksDBOptions
from sparkpoint.errors import SparkpointError
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.changelog import (
    ChangeTracking,
    decode_entry,
    decode_kv_changes,
    encode_entry,
    encode_kv_changes,
)
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.keyed_backend import AbstractKeyedStateBackend, SnapshotView
from sparkpoint.state.rocksdb.incremental import IncrementalMeta, upload_incremental
from sparkpoint.state.rocksdb.incremental_restore import IncrementalRestoreOperation
from sparkpoint.state.rocksdb.ledger import SstUploadLedger
from sparkpoint.state.rocksdb.local_db import (
    REGISTRY_END,
    REGISTRY_PREFIX,
    LocalRocksDB,
    corrupt_checkpoint,
    data_prefix,
    prefix_upper_bound,
)
from sparkpoint.state.rocksdb.options import PredefinedOptions, build_db_options
from sparkpoint.state.rocksdb.registry import (
    RegisteredState,
    next_state_id,
    read_registry,
    registry_record,
)
from sparkpoint.state.rocksdb.snapshot_view import CheckpointSnapshotView
from sparkpoint.state.rocksdb.table import RocksDBStateTable
from sparkpoint.state.rocksdb.timer_table import TIMER_LAYOUT, RocksDBTimerTable
from sparkpoint.state.rocksdb.ttl_cleanup import drop_expired_entries, last_cleanup_time
from sparkpoint.state.table import RegisteredStateMeta

__all__ = ["RocksDBKeyedStateBackend", "subtask_directory"]

_RANGE_KEY = b"\xff\x00range"
_LEDGER_ID_KEY = b"\xff\x00ledger-id"


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(part)) or "_"


def subtask_directory(
    params: KeyedStateBackendParameters, db_storage_paths: Sequence[str] | None = None
) -> str:
    """The local directory of one subtask's RocksDB (stable across tasks and processes)."""
    base = params.local_dir
    if db_storage_paths:
        ident = f"{params.job_id}/{params.operator_id}/{params.subtask_index}".encode()
        base = db_storage_paths[zlib.crc32(ident) % len(db_storage_paths)]
    return os.path.join(
        base,
        f"job_{_safe(params.job_id)}",
        f"op_{_safe(params.operator_id)}",
        f"subtask_{params.subtask_index}",
    )


class RocksDBKeyedStateBackend(ChangeTracking, AbstractKeyedStateBackend):
    """Keyed state of one subtask in an embedded RocksDB; see the module docstring."""

    backend_name = "rocksdb"
    batched_reads = True

    def __init__(
        self,
        params: KeyedStateBackendParameters,
        *,
        incremental: bool = False,
        predefined_options: int = PredefinedOptions.DEFAULT,
        options: dict[str, Any] | None = None,
        db_storage_paths: Sequence[str] | None = None,
        transfer_threads: int = RocksDBOptions.CHECKPOINT_TRANSFER_THREAD_NUM.default,
        ttl_compaction_filter: bool = True,
    ) -> None:
        super().__init__(params)
        if transfer_threads < 1:
            raise ValueError(f"transfer_threads must be >= 1, got {transfer_threads}")
        build_db_options(predefined_options, options)  # validate before touching disk
        self.incremental = incremental
        self.transfer_threads = transfer_threads
        self.ttl_compaction_filter = ttl_compaction_filter
        self._predefined = predefined_options
        self._options = dict(options or {})
        self.directory = subtask_directory(params, db_storage_paths)
        os.makedirs(self.directory, exist_ok=True)
        self._local = LocalRocksDB(
            os.path.join(self.directory, "db"),
            lambda: build_db_options(self._predefined, self._options),
        )
        self._ledger = SstUploadLedger.load(os.path.join(self.directory, "sst-ledger"))
        self._state_ids: dict[str, int] = {}
        self._check_range()
        self._check_ledger()
        self._load_registry()

    def prefetch(self, keys: list[Any], key_groups: list[int]) -> None:
        """Read the batch's entries of every state the job has obtained, except MAP state
        (its entries are per user key), ahead of the records, whose point reads then hit."""
        for name in self._states:
            table = self._tables.get(name)
            if isinstance(table, RocksDBStateTable) and table.meta.kind is not StateKind.MAP:
                table.prefetch(key_groups, keys)

    # -- local database ------------------------------------------------------------------

    @property
    def local_db(self) -> LocalRocksDB:
        """The local database (for tests and tools)."""
        return self._local

    def _range_record(self) -> bytes:
        rng = self.key_group_range
        return struct.pack(">iii", self.max_parallelism, rng.start_key_group, rng.end_key_group)

    def _check_range(self) -> None:
        """Wipe a database created for another range or max parallelism (it is not ours)."""
        record = self._local.db.get(_RANGE_KEY)
        if record is not None and bytes(record) == self._range_record():
            return
        if record is not None:
            self._local.wipe()
            self.bind_ledger()
        self._local.db.put(_RANGE_KEY, self._range_record())

    def _check_ledger(self) -> None:
        """Start a new ledger unless the database is the one the ledger describes (SST file
        names repeat across database instances, so a stale ledger would be dangerous)."""
        bound = self._local.db.get(_LEDGER_ID_KEY)
        if bound is None or bytes(bound).decode() != self._ledger.backend_identifier:
            self.bind_ledger()

    def bind_ledger(
        self, confirmed: dict[str, StreamStateHandle] | None = None, checkpoint_id: int = -1
    ) -> None:
        """Reset the ledger for the database now in place (optionally with the confirmed SSTs
        of the checkpoint it was restored from) and record its identity in the database."""
        self._ledger.reset(confirmed, checkpoint_id)
        self._local.db.put(_LEDGER_ID_KEY, self._ledger.backend_identifier.encode())

    def _load_registry(self) -> None:
        """Create a table for every state registered in the database (a timers state still
        in the standard layout, restored from an older version's checkpoint, is rewritten in
        the timer layout first)."""
        self._tables.clear()
        self._states.clear()
        self._state_ids.clear()
        registry = read_registry(self._local.db)
        for name, record in registry.items():
            if record.layout is None and self._is_timer_state(record.meta):
                record = self._to_timer_layout(record, registry)
            self._state_ids[name] = record.state_id
            table = RocksDBTimerTable if record.layout == TIMER_LAYOUT else RocksDBStateTable
            self._tables[name] = table(
                record.meta, record.state_id, self._local, self.key_group_range
            )

    def _is_timer_state(self, meta: RegisteredStateMeta) -> bool:
        return meta.name in self.params.timer_states and meta.kind is StateKind.MAP

    def _to_timer_layout(
        self, record: RegisteredState, registry: dict[str, RegisteredState]
    ) -> RegisteredState:
        """Rewrite a standard-layout timers state in the timer layout under a new state id
        (written directly: this only happens right after a restore)."""
        new_id = next_state_id(r.state_id for r in registry.values())
        old = RocksDBStateTable(record.meta, record.state_id, self._local, self.key_group_range)
        new = RocksDBTimerTable(record.meta, new_id, self._local, self.key_group_range)
        for kg in self.key_group_range:
            rows = list(old.iter_entries_bytes(kg))
            if rows:
                new.put_entries_bytes(
                    kg, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
                )
                lower = data_prefix(kg, record.state_id)
                upper = prefix_upper_bound(lower)
                assert upper is not None
                self._local.delete_range_now(lower, upper)
        self._local.flush_bulk_writes()
        self._local.db.put(*registry_record(new_id, record.meta, TIMER_LAYOUT))
        converted = RegisteredState(new_id, record.meta, TIMER_LAYOUT)
        registry[record.meta.name] = converted
        return converted

    def registered_states(self) -> dict[str, int]:
        """State name -> state id, as registered in the database."""
        return dict(self._state_ids)

    def _create_table(self, meta: RegisteredStateMeta) -> RocksDBStateTable:
        """A table for ``meta``; a state re-registered with new serializers (migration) gets
        a fresh state id, so the old entries can be read while the new ones are written."""
        migrating = meta.name in self._tables
        state_id = self._state_ids.get(meta.name)
        if state_id is None or migrating:
            state_id = next_state_id(self._state_ids.values())
        timers = self._is_timer_state(meta)
        key, record = registry_record(state_id, meta, TIMER_LAYOUT if timers else None)
        if migrating:
            # part of the epoch: committed (or reverted) together with the migrated entries
            self._local.put(key, record)
        else:
            self._local.db.put(key, record)  # a new, empty state: safe to record at once
        self._state_ids[meta.name] = state_id
        table = RocksDBTimerTable if timers else RocksDBStateTable
        return table(meta, state_id, self._local, self.key_group_range)

    def _drop_tables(self) -> None:
        self._local.wipe()
        self.bind_ledger()
        self._local.db.put(_RANGE_KEY, self._range_record())
        self._tables.clear()
        self._states.clear()
        self._state_ids.clear()

    # -- epochs --------------------------------------------------------------------------

    def local_epoch(self) -> int | None:
        return self._local.local_epoch()

    def local_extra(self) -> bytes:
        return self._local.local_extra()

    def commit_local(self, epoch: int, extra: bytes = b"") -> None:
        if self._tracking:
            pending = self._local.pending_writes
            # Registry records (some are written outside epochs) travel with every entry: the
            # committed ones first, so pending ones (applied later) win.
            registry = list(self._local.committed_entries(REGISTRY_PREFIX, REGISTRY_END))
            values: list[bytes | None] = [v for _, v in registry]
            values.extend(pending.values())
            self._changes = (
                None
                if not pending
                else encode_entry(
                    "rocksdb", encode_kv_changes([k for k, _ in registry] + list(pending), values)
                )
            )
        self._local.commit(epoch, extra)

    # -- changelog -----------------------------------------------------------------------

    def apply_changes(self, entries: Sequence[bytes]) -> None:
        """Write every entry's puts and deletes, in order, over the restored database."""
        local = self._local
        for n, raw in enumerate(entries):
            payload = decode_entry(raw, "rocksdb", f"#{n}")
            for key, value in decode_kv_changes(payload, f"#{n}"):
                if value is None:
                    local.delete(key)
                else:
                    local.put(key, value)
        local.flush_pending_now()
        self._load_registry()

    def revert_to(self, epoch: int) -> bool:
        before = self._local.local_epoch()
        reverted = self._local.revert(epoch)
        if reverted and before != epoch:
            # The database is an earlier copy now: SST file numbers may be used again with
            # other contents, so no file uploaded before may be referenced again.
            self.bind_ledger()
        self._load_registry()  # a reverted migration changes state ids back
        return reverted

    # -- TTL cleanup (instead of a compaction filter) ------------------------------------

    def _ttl_cleanup_states(self) -> list[tuple[RocksDBStateTable, int]]:
        out: list[tuple[RocksDBStateTable, int]] = []
        if not self.ttl_compaction_filter:
            return out
        for name, desc in self._descriptors.items():
            cfg = desc.get_ttl_config()
            table = self._tables.get(name)
            if cfg is None or not cfg.is_enabled() or not isinstance(table, RocksDBStateTable):
                continue
            if cfg.get_cleanup_strategies().get_rocksdb_compact_filter_cleanup_strategy() is None:
                continue
            out.append((table, cfg.get_ttl_millis()))
        return out

    def cleanup_expired_state(self) -> int:
        """Delete expired entries of TTL states with RocksDB cleanup configured (committed
        state only, written directly); returns how many entries were removed or shortened."""
        states = self._ttl_cleanup_states()
        if not states:
            return 0
        return drop_expired_entries(self._local, states, self.key_group_range, self.now())

    def _maybe_cleanup_expired_state(self) -> None:
        """Run the cleanup scan when the shortest TTL has passed since the last one, so no
        expired entry stays on disk (or in checkpoints) much longer than twice its TTL."""
        states = self._ttl_cleanup_states()
        if not states:
            return
        last = last_cleanup_time(self._local)
        if last is not None and self.now() - last < min(ttl for _, ttl in states):
            return
        self.cleanup_expired_state()

    # -- snapshots -----------------------------------------------------------------------

    def _require_committed(self) -> None:
        if self._local.has_pending():
            raise SparkpointError(
                "RocksDB keyed state has uncommitted changes: call commit_local(epoch) before "
                "snapshot() (snapshots cover committed epochs only)"
            )

    def _local_checkpoint(self, checkpoint_id: int) -> str:
        directory = os.path.join(self.directory, f"chk-{checkpoint_id}-{uuid.uuid4().hex[:8]}")
        self._local.create_checkpoint(directory)
        return directory

    def _snapshot_view(self, metas: Sequence[RegisteredStateMeta]) -> SnapshotView:
        directory = self._local_checkpoint(-1)
        tables = self._tables
        return CheckpointSnapshotView(
            directory,
            [self._state_ids[m.name] for m in metas],
            [m.kind is StateKind.MAP for m in metas],
            [getattr(tables.get(m.name), "codec", None) for m in metas],
        )

    def snapshot(
        self,
        checkpoint_id: int,
        stream_factory: CheckpointStreamFactory,
        snapshot_type: str = SnapshotType.CHECKPOINT,
    ) -> Callable[[], KeyedStateHandle | None]:
        self._require_committed()
        self._maybe_cleanup_expired_state()
        if not self.incremental or snapshot_type == SnapshotType.SAVEPOINT:
            return super().snapshot(checkpoint_id, stream_factory, snapshot_type)
        if not self._tables:
            return lambda: None
        directory = self._local_checkpoint(checkpoint_id)
        meta = IncrementalMeta(self.max_parallelism, self.key_group_range, dict(self._state_ids))
        ledger = self._ledger
        threads = self.transfer_threads
        # A full checkpoint (the first after a restore) uploads every file again, so it
        # never depends on the restored snapshot's files (Flink's NO_CLAIM rule).
        reuse = snapshot_type == SnapshotType.CHECKPOINT

        def upload() -> KeyedStateHandle | None:
            try:
                return upload_incremental(
                    directory, checkpoint_id, stream_factory, ledger, meta, threads, reuse
                )
            finally:
                shutil.rmtree(directory, ignore_errors=True)

        return upload

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._ledger.complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._ledger.abort(checkpoint_id)

    # -- restore -------------------------------------------------------------------------

    def restore(self, handles: Sequence[KeyedStateHandle]) -> None:
        with self._local.bulk_load(os.path.join(self.directory, f"bulk-{uuid.uuid4().hex[:8]}")):
            super().restore(handles)
        self._local.flush_pending_now()
        self._local.reset_epochs()
        self._local.flush_bulk_writes()

    def _restore_other(self, handles: Sequence[KeyedStateHandle]) -> None:
        incremental = [h for h in handles if isinstance(h, IncrementalRemoteKeyedStateHandle)]
        if len(incremental) != len(handles):
            super()._restore_other(
                [h for h in handles if not isinstance(h, IncrementalRemoteKeyedStateHandle)]
            )
        operation = IncrementalRestoreOperation(
            self._local,
            self.key_group_range,
            self.max_parallelism,
            self.directory,
            self.transfer_threads,
        )
        try:
            result = operation.restore(incremental)
            if result is None:
                return
            # Adopt the database the restore put in place: its range, ledger and registry.
            self._local.db.put(_RANGE_KEY, self._range_record())
            self.bind_ledger(result.confirmed_files, result.checkpoint_id)
            self._load_registry()
        except Exception as exc:
            where = describe_stream(incremental[0].meta_state_handle)
            corrupt = corrupt_checkpoint(exc, f"{incremental[0].checkpoint_id} ({where})")
            if corrupt is None:
                raise
            raise corrupt from None

    @property
    def ledger(self) -> SstUploadLedger:
        """What incremental snapshots uploaded and which checkpoint was confirmed."""
        return self._ledger

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        self._local.close()

    def dispose(self) -> None:
        self._local.destroy()
        shutil.rmtree(self.directory, ignore_errors=True)
