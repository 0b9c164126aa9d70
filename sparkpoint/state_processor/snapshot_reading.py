"""What a savepoint or retained checkpoint holds, and reading its key groups on an executor.

The driver side loads ``_metadata``, lists the operators, collects the state meta infos of an
operator (from the snapshot headers of key-groups handles, or from the state registry inside
incremental RocksDB checkpoints) and cuts the handles into ``ReadSplit``s of about equal
bytes. The executor side reads one split straight from storage: a key-groups handle by
seeking to each key group's offset, an incremental RocksDB handle by downloading its files and
scanning the key-group range, a changelog checkpoint's handle by rebuilding its state
(materialization plus changes) as a snapshot in memory. All yield the entries of each key
group as canonical byte columns per state, the form every snapshot format shares. Plain
Python; no Spark.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkpoint.checkpoint.fs_location import resolve_checkpoint_pointer
from sparkpoint.checkpoint.handles import (
    ChangelogStateBackendHandle,
    FileStateHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    describe_stream,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_metadata
from sparkpoint.checkpoint.storage import CompletedCheckpointStorageLocation, read_metadata_bytes
from sparkpoint.checkpoint.trust import SnapshotTrust, default_trust
from sparkpoint.errors import CorruptStateError, RestoreError
from sparkpoint.runtime.operators.context import TIMERS_STATE
from sparkpoint.state.backend import KeyedStateBackendParameters
from sparkpoint.state.changelog_restore import rebuild_as_snapshot
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.key_groups import UPPER_BOUND_MAX_PARALLELISM
from sparkpoint.state.snapshot_format import (
    OBJECT_ENCODINGS,
    Columns,
    arrow_state_runs,
    decode_arrow_block,
    decode_object_block,
    open_key_groups,
    read_header,
)
from sparkpoint.state.table import RegisteredStateMeta

__all__ = [
    "KeyGroupEntries",
    "OperatorInfo",
    "ReadSplit",
    "Snapshot",
    "merge_metas",
    "plan_splits",
    "read_split",
    "rebuilt_snapshot",
    "registry_metas",
]

_TRANSFER_THREADS = 4


@dataclass(frozen=True)
class OperatorInfo:
    """One operator of a snapshot: its uid, parallelism, max parallelism and state."""

    uid: str
    parallelism: int
    max_parallelism: int
    state_format: str  # "savepoint", "full checkpoint", "incremental checkpoint" or "none"
    state_size: int
    subtasks_with_state: int


def _state_format(handles: Sequence[KeyedStateHandle]) -> str:
    kinds = set()
    for h in handles:
        if isinstance(h, KeyGroupsSavepointStateHandle):
            kinds.add("savepoint")
        elif isinstance(h, KeyGroupsStateHandle):
            kinds.add("full checkpoint")
        elif isinstance(h, IncrementalRemoteKeyedStateHandle):
            kinds.add("incremental checkpoint")
        elif isinstance(h, ChangelogStateBackendHandle):
            kinds.add("changelog checkpoint")
        else:
            kinds.add(type(h).__name__)
    return " + ".join(sorted(kinds)) or "none"


class Snapshot:
    """A loaded savepoint or retained checkpoint (its ``_metadata``)."""

    def __init__(
        self,
        metadata: CheckpointMetadata,
        location: CompletedCheckpointStorageLocation,
        trust: SnapshotTrust | None = None,
    ) -> None:
        self.metadata = metadata
        self.location = location
        self.trust = default_trust() if trust is None else trust

    @staticmethod
    def load(pointer: str, trust: SnapshotTrust | None = None) -> Snapshot:
        """Load the snapshot at ``pointer`` (its directory or its ``_metadata`` file),
        checked against ``trust`` (default: the process's, ``trust.default_trust``)."""
        trust = default_trust() if trust is None else trust
        location = resolve_checkpoint_pointer(pointer)
        handle = location.metadata_handle
        source = handle.path if isinstance(handle, FileStateHandle) else pointer
        data = read_metadata_bytes(handle, source)
        metadata = load_checkpoint_metadata(data, location.exclusive_dir, source, trust=trust)
        return Snapshot(metadata, location, trust)

    @property
    def pointer(self) -> str:
        """The snapshot's directory."""
        return self.location.external_pointer

    @property
    def pickle_allowed(self) -> bool:
        """Whether its pickled state is unpickled (else read as plain data only):
        ``allow-pickle`` when set, else only when a signing key verified it (a reader has
        no job whose own snapshots it could recognise)."""
        return self.trust.pickle_allowed(self.trust.signed)

    def operators(self) -> list[OperatorInfo]:
        """Every operator recorded in the snapshot."""
        out = []
        for op in self.metadata.operator_states:
            handles = keyed_handles(op)
            subtasks = sum(1 for s in op.subtask_states.values() if s.managed_keyed_state)
            out.append(
                OperatorInfo(
                    op.operator_id,
                    op.parallelism,
                    op.max_parallelism,
                    _state_format(handles),
                    op.state_size,
                    subtasks,
                )
            )
        return out

    def operator(self, uid: str) -> OperatorState:
        """The state of operator ``uid``; ``KeyError`` naming the operators there are."""
        op = self.metadata.get_operator_state(uid)
        if op is None:
            known = ", ".join(repr(o.operator_id) for o in self.metadata.operator_states)
            raise KeyError(
                f"Operator {uid!r} is not in the snapshot {self.pointer} "
                f"(operators: {known or 'none'})"
            )
        return op


def keyed_handles(op: OperatorState) -> list[KeyedStateHandle]:
    """The managed keyed state handles of every subtask of ``op``; a changelog handle
    without entries stands for its materialization."""
    out: list[KeyedStateHandle] = []
    for sub in op.subtask_states.values():
        for h in sub.managed_keyed_state:
            if isinstance(h, ChangelogStateBackendHandle) and not h.changelog:
                out.extend(h.materialized)
            else:
                out.append(h)
    return out


def rebuilt_snapshot(
    handle: ChangelogStateBackendHandle, max_parallelism: int
) -> KeyGroupsStateHandle | None:
    """A changelog handle's state (of an operator with ``max_parallelism``) as a canonical
    snapshot in memory (``None``: empty)."""
    params = KeyedStateBackendParameters(
        job_id="state-processor",
        operator_id="",
        subtask_index=0,
        parallelism=1,
        max_parallelism=max_parallelism,
        key_group_range=handle.range,
        local_dir="",
        timer_states=frozenset({TIMERS_STATE}),
    )
    rebuilt = rebuild_as_snapshot(handle, params)
    if rebuilt is not None and not isinstance(rebuilt, KeyGroupsStateHandle):
        raise RestoreError(f"Rebuilt changelog state is a {type(rebuilt).__name__}")
    return rebuilt


def merge_metas(found: Sequence[RegisteredStateMeta], where: str) -> dict[str, RegisteredStateMeta]:
    """One meta info per state name; a state recorded with two layouts is refused."""
    out: dict[str, RegisteredStateMeta] = {}
    for meta in found:
        known = out.get(meta.name)
        if known is None:
            out[meta.name] = meta
        elif not known.same_layout(meta):
            raise RestoreError(
                f"State {meta.name!r} of {where} is recorded with different "
                f"serializers in two subtasks: {known.to_json()} vs "
                f"{meta.to_json()}"
            )
    return out


def key_groups_metas(handles: Sequence[KeyGroupsStateHandle]) -> list[RegisteredStateMeta]:
    """The state meta infos in the headers of key-groups handles (one small read each)."""
    out: list[RegisteredStateMeta] = []
    for h in handles:
        with h.delegate.open_input_stream() as stream:
            out.extend(read_header(stream, h.delegate.state_size).states)
    return out


# -- splits ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadSplit:
    """What one task reads: a handle and the key groups of it to read."""

    handle: KeyedStateHandle
    key_groups: KeyGroupRange
    max_parallelism: int = UPPER_BOUND_MAX_PARALLELISM  # of the operator


def _group_sizes(handle: KeyGroupsStateHandle) -> list[tuple[int, int]]:
    """``(key group, bytes)`` per key group of a handle, from the offsets alone."""
    items = handle.group_range_offsets.items()
    present = sorted((off, kg) for kg, off in items if off >= 0)
    end = handle.delegate.state_size
    size = {kg: nxt - off for (off, kg), (nxt, _) in itertools.pairwise([*present, (end, -1)])}
    return [(kg, size.get(kg, 0)) for kg, _ in items]


def plan_splits(
    handles: Sequence[KeyedStateHandle],
    target_splits: int,
    max_parallelism: int = UPPER_BOUND_MAX_PARALLELISM,
) -> list[ReadSplit]:
    """Cut ``handles`` into about ``target_splits`` splits of about equal bytes.

    A key-groups handle is cut between key groups (a task seeks to each of its groups); an
    incremental RocksDB handle is one split, since its files are read as a whole, and so is
    a changelog handle, whose state is rebuilt as a whole.
    """
    total = sum(h.state_size for h in handles) or 1
    per_split = max(1, total // max(1, target_splits))
    out: list[ReadSplit] = []
    for h in handles:
        if not isinstance(h, KeyGroupsStateHandle):
            out.append(ReadSplit(h, h.key_group_range, max_parallelism))
            continue
        start, acc = None, 0
        last = h.key_group_range.end_key_group
        for kg, size in _group_sizes(h):
            if start is None:
                start = kg
            acc += size
            if acc >= per_split or kg == last:
                out.append(ReadSplit(h, KeyGroupRange.of(start, kg), max_parallelism))
                start, acc = None, 0
    return out


# -- reading on an executor --------------------------------------------------------------

# One key group: its number, and per state name (meta info, canonical columns).
KeyGroupEntries = tuple[int, dict[str, tuple[RegisteredStateMeta, Columns]]]


def read_split(split: ReadSplit) -> Iterator[KeyGroupEntries]:
    """The non-empty key groups of ``split``, in key-group order."""
    handle = split.handle
    if isinstance(handle, KeyGroupsStateHandle):
        yield from _read_key_groups(handle, split.key_groups)
    elif isinstance(handle, IncrementalRemoteKeyedStateHandle):
        yield from _read_incremental(handle, split.key_groups)
    elif isinstance(handle, ChangelogStateBackendHandle):
        rebuilt = rebuilt_snapshot(handle, split.max_parallelism)
        if rebuilt is not None:
            yield from _read_key_groups(rebuilt, split.key_groups)
    else:
        raise RestoreError(f"Cannot read keyed state handles of type {type(handle).__name__}")


def _object_columns(meta: RegisteredStateMeta, objects: dict[Any, Any]) -> Columns:
    keys: list[bytes] = []
    uks: list[bytes] | None = [] if meta.kind is StateKind.MAP else None
    vals: list[bytes] = []
    for key, stored in objects.items():
        kb = meta.encode_key(key)
        if uks is not None:
            for uk, v in stored.items():
                keys.append(kb)
                uks.append(meta.encode_user_key(uk))
                vals.append(meta.encode_value(v))
        else:
            keys.append(kb)
            vals.append(meta.encode_value(stored))
    return keys, uks, vals


def _read_key_groups(handle: KeyGroupsStateHandle, rng: KeyGroupRange) -> Iterator[KeyGroupEntries]:
    part = handle.get_intersection(rng)
    if part is None:
        return
    stream = describe_stream(part.delegate)
    with open_key_groups(part) as (header, blocks):
        metas = header.states
        for kg, block in blocks:
            out: dict[str, tuple[RegisteredStateMeta, Columns]] = {}
            where = f"{stream}, key group {kg}"
            if header.block_encoding in OBJECT_ENCODINGS:
                try:
                    for sid, objects in decode_object_block(
                        header.block_encoding, block, [m.name for m in metas], where
                    ):
                        out[metas[sid].name] = (metas[sid], _object_columns(metas[sid], objects))
                except (AttributeError, TypeError, ValueError) as e:
                    if isinstance(e, CorruptStateError):
                        raise
                    raise CorruptStateError(
                        f"Corrupt keyed state in {where}: {type(e).__name__}: {e}"
                    ) from None
            else:
                batch = decode_arrow_block(block, where, len(metas))
                for sid, keys, uks, vals in arrow_state_runs(batch):
                    meta = metas[sid]
                    cols = (keys, uks if meta.kind is StateKind.MAP else None, vals)
                    out[meta.name] = _concat(out.get(meta.name), meta, cols)
            yield kg, out


def _concat(
    prev: tuple[RegisteredStateMeta, Columns] | None, meta: RegisteredStateMeta, cols: Columns
) -> tuple[RegisteredStateMeta, Columns]:
    if prev is None:
        return meta, cols
    a = prev[1]
    return meta, (
        pa.concat_arrays([a[0], cols[0]]),
        None if a[1] is None else pa.concat_arrays([a[1], cols[1]]),
        pa.concat_arrays([a[2], cols[2]]),
    )


def _open_incremental(handle: IncrementalRemoteKeyedStateHandle, directory: str) -> Any:
    import rocksdict

    from sparkpoint.state.rocksdb.incremental import download_handle

    download_handle(handle, directory, _TRANSFER_THREADS)
    return rocksdict.Rdict(
        directory, rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only()
    )


def registry_metas(handle: IncrementalRemoteKeyedStateHandle) -> list[dict[str, Any]]:
    """The meta infos (JSON) of every state registered in an incremental RocksDB handle:
    its files are downloaded to a temporary directory, opened read-only, and deleted."""
    from sparkpoint.state.rocksdb.registry import read_registry

    work = tempfile.mkdtemp(prefix="sparkpoint-describe-")
    try:
        db = _open_incremental(handle, os.path.join(work, "db"))
        try:
            return [r.meta.to_json() for r in read_registry(db).values()]
        finally:
            db.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _read_incremental(
    handle: IncrementalRemoteKeyedStateHandle, rng: KeyGroupRange
) -> Iterator[KeyGroupEntries]:
    from sparkpoint.state.rocksdb.local_db import corrupt_checkpoint

    try:
        yield from _read_incremental_db(handle, rng)
    except Exception as exc:
        where = f"{handle.checkpoint_id} ({describe_stream(handle.meta_state_handle)})"
        corrupt = corrupt_checkpoint(exc, where)
        if corrupt is None:
            raise
        raise corrupt from None


def _read_incremental_db(
    handle: IncrementalRemoteKeyedStateHandle, rng: KeyGroupRange
) -> Iterator[KeyGroupEntries]:
    import rocksdict

    from sparkpoint.state.rocksdb.local_db import key_group_bounds
    from sparkpoint.state.rocksdb.registry import read_registry
    from sparkpoint.state.rocksdb.table import split_entry_key
    from sparkpoint.state.rocksdb.timer_table import TIMER_LAYOUT, TimerCodec

    inter = handle.key_group_range.get_intersection(rng)
    if inter.is_empty():
        return
    work = tempfile.mkdtemp(prefix="sparkpoint-read-")
    try:
        db = _open_incremental(handle, os.path.join(work, "db"))
        try:
            registry = read_registry(db).values()
            by_id = {r.state_id: r.meta for r in registry}
            # states in the timer layout: entry keys -> canonical rows
            timers = {r.state_id: TimerCodec(r.meta) for r in registry if r.layout == TIMER_LAYOUT}
            lower, upper = key_group_bounds(inter.start_key_group, inter.end_key_group)
            read_opt = rocksdict.ReadOptions()
            read_opt.set_iterate_upper_bound(upper)
            current = -1
            groups: dict[int, tuple[list[bytes], list[bytes] | None, list[bytes]]] = {}
            for raw_key, value in db.items(from_key=lower, read_opt=read_opt):
                kg = int.from_bytes(raw_key[:2], "big")
                if kg != current:
                    if groups:
                        yield current, _named(groups, by_id, handle)
                    current, groups = kg, {}
                sid = int.from_bytes(raw_key[2:4], "big")
                cols = groups.get(sid)
                if cols is None:
                    meta = by_id.get(sid)
                    is_map = meta is not None and meta.kind is StateKind.MAP
                    cols = groups[sid] = ([], [] if is_map else None, [])
                codec = timers.get(sid)
                if codec is not None:
                    kb, rest, value = codec.row(raw_key, value)
                else:
                    kb, rest = split_entry_key(raw_key)
                cols[0].append(kb)
                if cols[1] is not None:
                    cols[1].append(rest)
                cols[2].append(value)
            if groups:
                yield current, _named(groups, by_id, handle)
        finally:
            db.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _named(
    groups: dict[int, Any],
    by_id: dict[int, RegisteredStateMeta],
    handle: IncrementalRemoteKeyedStateHandle,
) -> dict[str, tuple[RegisteredStateMeta, Columns]]:
    out = {}
    for sid, cols in groups.items():
        meta = by_id.get(sid)
        if meta is None:
            raise RestoreError(
                f"Corrupt RocksDB checkpoint {handle.checkpoint_id}: data of "
                f"an unregistered state id {sid}"
            )
        out[meta.name] = (meta, cols)
    return out
