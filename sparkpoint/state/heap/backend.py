"""``HeapKeyedStateBackend``: the working state of ``HashMapStateBackend``, on the heap.

Local commits cost what changed: the values of the keys written in the epoch go to one
delta file (``delta-<token>.pkl``: per key group and state, the new values and the deleted
keys); a changed key group is rewritten whole (``kg<N>-<token>.pkl``, the ``pickle`` block
of ``snapshot_format``) only when it has no file yet, was changed in bulk, or its deltas
since its last whole file add up to more keys than it holds. Then a JSON marker is
published atomically (temp name + ``os.replace``): every key group's file with its state
names, the deltas to apply over them in order, the epoch and the runtime's ``extra`` bytes;
it keeps the previous commit so ``revert_to(epoch - 1)`` works once. Files no marker
references are deleted (the files and the marker: ``commit_files``).

Reopening local state and restoring heap checkpoints read the blocks but decode a key group
only when it is first touched (``PendingBlocks``); an untouched group is committed back as
the same bytes.

A checkpoint taken right after a local commit (the runtime's case) hard-links the commit's
files in its synchronous part and its upload copies them into ``pickle-chain`` blocks of the
key-groups format (``snapshot_format``, ``file_snapshot``): no state is encoded again.
Savepoints, snapshots with uncommitted changes and TTL cleanup in full snapshots encode the
copy-on-write view.

A process-wide cache (``cache``) keeps the live tables after ``close()``: a task that runs
in the same Python worker again adopts them instead of reloading: as they are when the
marker is the commit they hold, or brought up to date when another worker of the executor
committed since (the deltas committed after them are applied, key groups rewritten whole
since are reloaded). Tables with uncommitted changes are never cached.
"""

from __future__ import annotations

import base64
import os
import pickle
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sparkpoint.checkpoint.handles import KeyedStateHandle
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.errors import CorruptStateError, RestoreError
from sparkpoint.state import pickling
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.changelog import ChangeTracking, decode_entry, encode_entry
from sparkpoint.state.full_restore import PickleBlockSink
from sparkpoint.state.heap import cache
from sparkpoint.state.heap.commit_files import (
    collect_garbage,
    deltas_by_key_group,
    read_file,
    read_marker,
    write_file,
    write_marker,
)
from sparkpoint.state.heap.file_snapshot import snapshot_commit_files
from sparkpoint.state.heap.snapshot_view import HeapSnapshotView
from sparkpoint.state.heap.table import HeapStateTable, PendingBlocks
from sparkpoint.state.keyed_backend import AbstractKeyedStateBackend, SnapshotView
from sparkpoint.state.snapshot_format import SnapshotHeader, read_chain_block
from sparkpoint.state.table import RegisteredStateMeta, StateTable

__all__ = ["HeapKeyedStateBackend"]

_SUBDIR = "heap"
_SNAPSHOTS = "heap-snapshots"  # per running checkpoint upload: hard links to its files


def _queue_deltas(
    pending: PendingBlocks,
    tables: Mapping[str, HeapStateTable],
    deltas: Mapping[int, bytes],
    key_groups: Iterable[int],
    loads: Callable[[bytes], Any] = pickle.loads,
) -> None:
    """Queue the pickled deltas ``deltas[kg]`` of ``key_groups`` over their blocks
    (``loads``: ``pickle.loads`` for local files, ``pickling.loads`` for snapshot bytes)."""
    for kg in key_groups:
        for name, updates, deleted in loads(deltas[kg]):
            table = tables.get(name)
            if table is not None:
                pending.add_delta(kg, table, updates, deleted)


def _forget_group(
    pending: PendingBlocks, tables: Mapping[str, HeapStateTable], key_group: int
) -> None:
    """Drop ``key_group`` from the pending blocks and the tables (it is replaced whole)."""
    pending.drop(key_group)
    for t in tables.values():
        dict.pop(t.groups, key_group, None)


class HeapKeyedStateBackend(ChangeTracking, AbstractKeyedStateBackend):
    """Keyed state of one subtask in Python dicts, committed locally per epoch."""

    backend_name = "heap"

    def __init__(self, params: KeyedStateBackendParameters) -> None:
        super().__init__(params)
        self._dir = os.path.join(params.local_dir, _SUBDIR)
        os.makedirs(self._dir, exist_ok=True)
        self._pending = PendingBlocks()
        self._marker: dict[str, Any] | None = read_marker(self._dir, self._owner())
        # How the local state was opened: "empty", "cache", "cache caught up" or "files".
        self.opened_from = "empty"
        self._open_local_state()

    # -- tables --------------------------------------------------------------------------

    def _create_table(self, meta: RegisteredStateMeta) -> StateTable:
        table = HeapStateTable(meta, self._range)
        table.groups.pending = self._pending
        return table

    def _pickle_block_sink(self) -> PickleBlockSink | None:
        self._pending = PendingBlocks("restored checkpoint state", RestoreError)

        def sink(kg: int, block: bytes, tables: list[StateTable], encoding: str) -> None:
            heap_tables: list[HeapStateTable] = tables  # type: ignore[assignment]
            if encoding == "pickle":
                self._pending.add(kg, block, heap_tables)  # type: ignore[arg-type]
                return
            base_names, base, deltas = read_chain_block(block)
            by_name = {t.meta.name: t for t in heap_tables}
            if base is not None:
                self._pending.add(kg, base, [by_name.get(n) if n else None for n in base_names])
            for delta in deltas:
                for name, updates, deleted in delta:
                    table = by_name.get(name)
                    if table is not None:
                        self._pending.add_delta(kg, table, updates, deleted)

        return sink

    def _migrate(self, old: StateTable, meta: RegisteredStateMeta) -> StateTable:
        table = super()._migrate(old, meta)
        self._force_dirty = True
        return table

    def _heap_tables(self) -> dict[str, HeapStateTable]:
        return self._tables  # type: ignore[return-value]

    def _snapshot_view(self, metas: Sequence[RegisteredStateMeta]) -> SnapshotView:
        tables = self._heap_tables()
        return HeapSnapshotView([tables[m.name] for m in metas])

    # -- checkpoints from the local commit's files ---------------------------------------

    def snapshot(
        self,
        checkpoint_id: int,
        stream_factory: CheckpointStreamFactory,
        snapshot_type: str = SnapshotType.CHECKPOINT,
    ) -> Callable[[], KeyedStateHandle | None]:
        """A checkpoint right after a local commit copies the commit's files (``pickle-chain``
        blocks: each key group's whole-group block and its deltas, as written), so it
        encodes nothing; savepoints, uncommitted changes and TTL cleanup in full snapshots
        take the generic path (``full_snapshot``)."""
        if snapshot_type in (SnapshotType.CHECKPOINT, SnapshotType.FULL_CHECKPOINT):
            commit = self._committed_files()
            if commit is not None:
                return self._file_snapshot(checkpoint_id, stream_factory, commit)
        return super().snapshot(checkpoint_id, stream_factory, snapshot_type)

    def _committed_files(self) -> dict[str, Any] | None:
        """The marker, when the tables are exactly what it committed (else None)."""
        marker = self._marker
        tables = self._heap_tables()
        if marker is None or not tables or self._has_uncommitted_changes():
            return None
        if [RegisteredStateMeta.from_json(m).name for m in marker["states"]] != list(tables):
            return None
        metas = [t.meta for t in tables.values()]
        if any(ttl is not None for ttl in self._full_snapshot_ttl_cleanups(metas)):
            return None
        return marker

    def _file_snapshot(
        self,
        checkpoint_id: int,
        stream_factory: CheckpointStreamFactory,
        commit: dict[str, Any],
    ) -> Callable[[], KeyedStateHandle | None]:
        links = os.path.join(
            self.params.local_dir, _SNAPSHOTS, f"{checkpoint_id}-{uuid.uuid4().hex[:12]}"
        )
        header = SnapshotHeader(
            self.max_parallelism,
            self._range,
            tuple(t.meta for t in self._tables.values()),
            SnapshotType.CHECKPOINT,
            self.backend_name,
            block_encoding="pickle-chain",
        )
        return snapshot_commit_files(self._dir, links, commit, header, stream_factory)

    def restore(self, handles: Sequence[KeyedStateHandle]) -> None:
        """Replace the state by ``handles``; the local state then has no committed epoch
        (``local_epoch()`` is ``None``) until the next ``commit_local``."""
        super().restore(handles)
        self._marker = None
        self._force_dirty = True

    def _drop_tables(self) -> None:
        self._pending = PendingBlocks()
        self._tables = {}
        self._states.clear()
        self._force_dirty = True

    # -- local state ---------------------------------------------------------------------

    def _owner(self) -> dict[str, Any]:
        """The marker fields that say whose local state it is."""
        p = self.params
        return {
            "job_id": p.job_id,
            "operator_id": p.operator_id,
            "max_parallelism": p.max_parallelism,
            "key_group_range": [self._range.start_key_group, self._range.end_key_group],
        }

    def _open_local_state(self) -> None:
        """Adopt the cached tables (as they are, or caught up to the marker), else load the
        marker's files."""
        self._force_dirty = False
        marker = self._marker
        if marker is None:
            return
        cached = cache.take(self._dir)
        if cached is not None and cached.marker["token"] == marker["token"]:
            self.opened_from = "cache"
        elif cached is not None and self._catch_up(cached, marker):
            self.opened_from = "cache caught up"
        else:
            self.opened_from = "files"
            self._load_commit(marker)
            return
        assert cached is not None
        self._tables = dict(cached.tables)
        self._pending = cached.pending

    def _catch_up(self, cached: cache.CachedTables, marker: dict[str, Any]) -> bool:
        """Bring tables cached at an earlier commit up to ``marker`` (another Python worker
        of the executor committed since): apply the deltas committed after it, and reload
        only the key groups rewritten whole since. False when that is not possible (states
        changed, not an earlier commit, a snapshot still reads the tables)."""
        old = cached.marker
        tables = cached.tables
        if (
            old["states"] != marker["states"]
            or int(old["epoch"]) >= int(marker["epoch"])
            or any(t.snapshot_running() for t in tables.values())
        ):
            return False
        old_files = {int(k): v for k, v in old["files"].items()}
        new_files = {int(k): v for k, v in marker["files"].items()}
        old_deltas = deltas_by_key_group(old)
        new_deltas = deltas_by_key_group(marker)
        reload = set()
        for kg in old_files.keys() | new_files.keys():
            applied = old_deltas.get(kg, [])
            if (
                old_files.get(kg) != new_files.get(kg)
                or new_deltas.get(kg, [])[: len(applied)] != applied
            ):
                reload.add(kg)
        pending = cached.pending
        for kg in reload:
            _forget_group(pending, tables, kg)
            if kg in new_files:
                fname, names = new_files[kg]
                pending.add(kg, read_file(self._dir, fname), [tables.get(n) for n in names])
        for fname, kgs in marker.get("deltas") or []:
            todo = [kg for kg in kgs if kg in reload or fname not in old_deltas.get(kg, ())]
            if todo:
                _queue_deltas(pending, tables, pickle.loads(read_file(self._dir, fname)), todo)
        return True

    def _load_commit(self, commit: dict[str, Any]) -> None:
        self._pending = PendingBlocks()
        tables: dict[str, HeapStateTable] = {}
        for meta_json in commit["states"]:
            meta = RegisteredStateMeta.from_json(meta_json)
            tables[meta.name] = self._create_table(meta)  # type: ignore[assignment]
        for kg_str, (fname, names) in commit["files"].items():
            self._pending.add(
                int(kg_str), read_file(self._dir, fname), [tables.get(n) for n in names]
            )
        for fname, kgs in commit.get("deltas", []):
            _queue_deltas(self._pending, tables, pickle.loads(read_file(self._dir, fname)), kgs)
        for t in tables.values():
            t.mark_committed()
        self._tables = dict(tables)
        self._states.clear()
        self._force_dirty = False

    def local_epoch(self) -> int | None:
        return None if self._marker is None else int(self._marker["epoch"])

    def local_extra(self) -> bytes:
        if self._marker is None:
            return b""
        return base64.b64decode(self._marker["extra"])

    def commit_local(self, epoch: int, extra: bytes = b"") -> None:
        tables = self._heap_tables()
        prev = self._marker
        prev_files: dict[str, Any] = {} if prev is None else dict(prev["files"])
        chain: dict[str, int] = {} if prev is None else dict(prev.get("chain", {}))
        if self._force_dirty:
            dirty: set[int] = set(self._range)
        else:
            dirty = set()
            for t in tables.values():
                dirty |= t.dirty
        token = uuid.uuid4().hex[:12]
        names = list(tables)
        whole: set[int] = set(self._range) if self._force_dirty else set()
        for t in tables.values():
            whole |= t.whole
        # The delta of each dirty key group, unless it is cheaper (or needed) to rewrite it.
        deltas: dict[int, list[tuple[str, dict[Any, Any], list[Any]]]] = {}
        for kg in sorted(dirty - whole):
            if str(kg) not in prev_files or self._pending.names_of(kg) is not None:
                continue
            entries = []
            count = 0
            for name, t in tables.items():
                keys = t.touched[kg]
                if not keys:
                    continue
                group = t.groups[kg]
                updates = {k: group[k] for k in keys if k in group}
                entries.append((name, updates, [k for k in keys if k not in group]))
                count += len(keys)
            size = sum(len(t.groups[kg]) for t in tables.values())
            if chain.get(str(kg), 0) + count <= size:
                deltas[kg] = entries
                chain[str(kg)] = chain.get(str(kg), 0) + count
        rewrite = dirty - set(deltas)
        files = {k: v for k, v in prev_files.items() if int(k) not in rewrite}
        # key group -> (block, state names) or None (now empty): the changelog entry
        changed: dict[int, tuple[bytes, list[str | None]] | None] = {}
        for kg in sorted(rewrite):
            chain.pop(str(kg), None)
            raw = self._pending.names_of(kg)
            if raw is not None:  # never decoded: write the same bytes back
                block, block_names = raw
            else:
                present = [
                    (i, tables[n].groups[kg]) for i, n in enumerate(names) if tables[n].groups[kg]
                ]
                if not present:
                    changed[kg] = None
                    continue
                block, block_names = pickle.dumps(present, protocol=5), list(names)
            changed[kg] = (block, block_names)
            fname = f"kg{kg}-{token}.pkl"
            write_file(self._dir, fname, block)
            files[str(kg)] = [fname, block_names]
        # Earlier deltas of rewritten key groups no longer apply.
        delta_files = [
            [fname, [kg for kg in kgs if kg not in rewrite]]
            for fname, kgs in ([] if prev is None else prev.get("deltas", []))
        ]
        delta_files = [d for d in delta_files if d[1]]
        delta_block = b""
        if deltas:
            # Each key group's delta pickled apart, so checkpoints copy them as they are.
            delta_block = pickle.dumps(
                {kg: pickle.dumps(entries, protocol=5) for kg, entries in deltas.items()},
                protocol=5,
            )
            fname = f"delta-{token}.pkl"
            write_file(self._dir, fname, delta_block)
            delta_files.append([fname, sorted(deltas)])
        marker: dict[str, Any] = {
            "token": token,
            "epoch": epoch,
            "extra": base64.b64encode(extra).decode("ascii"),
            **self._owner(),
            "states": [t.meta.to_json() for t in tables.values()],
            "files": files,
            "deltas": delta_files,
            "chain": chain,
            "prev": None
            if prev is None
            else {
                k: prev.get(k)
                for k in ("token", "epoch", "extra", "states", "files", "deltas", "chain")
            },
        }
        self._write_marker(marker)
        for t in tables.values():
            t.mark_committed()
        self._force_dirty = False
        collect_garbage(self._dir, marker)
        if self._tracking:
            self._changes = (
                None
                if not changed and not deltas
                else encode_entry(
                    "heap",
                    pickle.dumps(
                        {"states": marker["states"], "groups": changed, "deltas": delta_block},
                        protocol=5,
                    ),
                )
            )

    # -- changelog -----------------------------------------------------------------------

    def apply_changes(self, entries: Sequence[bytes]) -> None:
        """Replace every key group an entry names by the entry's block (or by nothing)."""
        for n, raw in enumerate(entries):
            try:
                self._apply_entry(n, raw)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
                raise CorruptStateError(f"Changelog entry #{n} is corrupt: {e!r}") from None
        self._states.clear()
        self._force_dirty = True

    def _apply_entry(self, n: int, raw: bytes) -> None:
        what = f"changelog entry #{n}"
        data = pickling.loads(decode_entry(raw, "heap", f"#{n}"), what)
        for meta_json in data["states"]:
            meta = RegisteredStateMeta.from_json(meta_json)
            if meta.name not in self._tables:
                self._tables[meta.name] = self._create_table(meta)
        tables = self._heap_tables()
        for kg, entry in data["groups"].items():
            _forget_group(self._pending, tables, kg)
            if entry is not None:
                block, block_names = entry
                self._pending.add(kg, block, [tables.get(m) if m else None for m in block_names])
        if data.get("deltas"):
            deltas = pickling.loads(data["deltas"], what)
            _queue_deltas(self._pending, tables, deltas, deltas, lambda b: pickling.loads(b, what))

    def _write_marker(self, marker: dict[str, Any]) -> None:
        write_marker(self._dir, marker)
        self._marker = marker

    def revert_to(self, epoch: int) -> bool:
        marker = self._marker
        if marker is None:
            return False
        if int(marker["epoch"]) == epoch:
            if self._has_uncommitted_changes():
                self._load_commit(marker)
            return True
        prev = marker.get("prev")
        if not prev or int(prev["epoch"]) != epoch:
            return False
        reverted = {**prev, **self._owner(), "prev": None}
        self._write_marker(reverted)
        self._load_commit(reverted)
        collect_garbage(self._dir, reverted)
        return True

    def _has_uncommitted_changes(self) -> bool:
        return self._force_dirty or any(t.dirty for t in self._heap_tables().values())

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        marker = self._marker
        if marker is not None and not self._has_uncommitted_changes():
            cache.keep(
                self._dir, cache.CachedTables(marker, dict(self._heap_tables()), self._pending)
            )
        self._tables = {}
        self._states.clear()

    def dispose(self) -> None:
        self.close()
        cache.drop(self._dir)
        shutil.rmtree(self._dir, ignore_errors=True)
