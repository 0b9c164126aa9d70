"""Restores that must fail do so with clear errors: max parallelism clash, missing files."""

from __future__ import annotations

import os

import pytest

from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
)
from sparkpoint.errors import RestoreError
from sparkpoint.state.backend import SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.typeinfo import Types

V = ValueStateDescriptor("v", Types.STRING())


def _snapshot(harness, snapshot_type=SnapshotType.CHECKPOINT):
    b = harness.create()
    state = b.get_partitioned_state(V)
    for key in range(500):
        b.set_current_key(key)
        state.update("x" * 50 + str(key))
    b.commit_local(1)
    return harness.snapshot(b, 1, snapshot_type)


@pytest.mark.parametrize("snapshot_type", [SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT])
def test_max_parallelism_mismatch_is_refused(harness, snapshot_type) -> None:
    handle = _snapshot(harness, snapshot_type)
    other = harness.create(0, 1, max_parallelism=256)
    with pytest.raises(RestoreError, match="Max parallelism mismatch") as err:
        other.restore([handle])
    assert "128" in str(err.value) and "256" in str(err.value)


def _files(handle) -> list[str]:
    if isinstance(handle, KeyGroupsStateHandle):
        return [handle.delegate.path] if isinstance(handle.delegate, FileStateHandle) else []
    assert isinstance(handle, IncrementalRemoteKeyedStateHandle)
    return [
        p.handle.path
        for p in (*handle.shared_state, *handle.private_state)
        if isinstance(p.handle, FileStateHandle)
    ]


def test_missing_state_file_names_the_file(harness) -> None:
    handle = _snapshot(harness)
    if harness.storage == "memory":
        assert _files(handle) == []  # memory storage holds all state inline: nothing to lose
        return
    files = _files(handle)
    assert files
    victim = files[0]
    os.remove(victim.removeprefix("file://"))
    restored = harness.create()
    with pytest.raises(RestoreError) as err:
        restored.restore([handle])
    assert os.path.basename(victim) in str(err.value)
