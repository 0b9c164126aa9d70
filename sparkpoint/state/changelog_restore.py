"""Restoring changelog checkpoints (``ChangelogStateBackendHandle``): a materialization plus
the changes of every epoch since.

A subtask that owns exactly the key groups the handle was written for restores the
materialization and applies the entries, oldest first. Any other subtask (a restore at
another parallelism) cannot cut the entries by key group: it rebuilds the writer's state in
a scratch backend of the writer's kind and key groups, takes it as a canonical (savepoint)
snapshot in memory, and restores that cut to its own key groups, like any other snapshot.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Sequence

from sparkpoint.checkpoint.handles import (
    ChangelogStateBackendHandle,
    KeyedStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.errors import SparkpointError
from sparkpoint.state.backend import KeyedStateBackend, KeyedStateBackendParameters, SnapshotType

__all__ = ["rebuild_as_snapshot", "restore_keyed_state"]

# The whole rebuilt state of one writer is held in memory once, as one snapshot stream.
_NO_LIMIT = 2**62


def restore_keyed_state(
    backend: KeyedStateBackend,
    params: KeyedStateBackendParameters,
    handles: Sequence[KeyedStateHandle],
) -> int:
    """Restore ``handles`` into ``backend`` (created from ``params``), unfolding changelog
    handles; returns the number of changelog entries applied."""
    snapshots: list[KeyedStateHandle] = []
    entries: tuple[StreamStateHandle, ...] = ()
    replayed = 0
    for handle in handles:
        if not isinstance(handle, ChangelogStateBackendHandle):
            snapshots.append(handle)
        elif not handle.changelog:
            snapshots.extend(handle.materialized)
        elif len(handles) == 1 and handle.range == params.key_group_range:
            snapshots.extend(handle.materialized)
            entries = handle.changelog
        else:
            rebuilt = rebuild_as_snapshot(handle, params)
            if rebuilt is not None:
                snapshots.append(rebuilt)
            replayed += len(handle.changelog)
    backend.restore(snapshots)
    if entries:
        backend.apply_changes([entry.read_all() for entry in entries])
    return replayed + len(entries)


def rebuild_as_snapshot(
    handle: ChangelogStateBackendHandle, params: KeyedStateBackendParameters
) -> KeyedStateHandle | None:
    """The state ``handle`` stands for, as a canonical snapshot held in memory (``None``
    when empty); ``params`` gives everything but the key groups and the local directory."""
    # beside the subtask's own local state (an executor's local disk), else the temp dir
    parent = os.path.dirname(params.local_dir.rstrip(os.sep)) if params.local_dir else ""
    scratch_dir = tempfile.mkdtemp(
        prefix="sparkpoint-changelog-", dir=parent if os.path.isdir(parent) else None
    )
    scratch_params = dataclasses.replace(
        params, key_group_range=handle.range, local_dir=scratch_dir
    )
    scratch = _scratch_backend(handle.backend_identifier, scratch_params)
    try:
        scratch.restore(list(handle.materialized))
        if handle.changelog:
            scratch.apply_changes([entry.read_all() for entry in handle.changelog])
        upload = scratch.snapshot(
            handle.checkpoint_id, MemCheckpointStreamFactory(_NO_LIMIT), SnapshotType.SAVEPOINT
        )
        return upload()
    finally:
        scratch.dispose()
        shutil.rmtree(scratch_dir, ignore_errors=True)


def _scratch_backend(identifier: str, params: KeyedStateBackendParameters) -> KeyedStateBackend:
    if identifier == "heap":
        from sparkpoint.state.heap import HeapKeyedStateBackend

        return HeapKeyedStateBackend(params)
    if identifier == "rocksdb":
        from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend

        return RocksDBKeyedStateBackend(params)
    raise SparkpointError(
        f"Changelog checkpoint of a {identifier!r} state backend: cannot rebuild its state "
        "(known backends: heap, rocksdb)"
    )
