"""Snapshot -> restore round trips, consistency, rescaling, and cross-backend savepoints."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.state.backend import SnapshotType
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.heap import clear_heap_cache
from sparkpoint.state.typeinfo import Types

from .harness import MAX_P, Harness, fill, handles_of, owner

V = ValueStateDescriptor("v", Types.LONG())
L = ListStateDescriptor("l", Types.STRING())
M = MapStateDescriptor("m", Types.INT(), Types.STRING())
R = ReducingStateDescriptor("r", lambda a, b: a + b, Types.LONG())
U = ValueStateDescriptor("untyped")  # pickled values
STATES = {"v": V, "l": L, "m": M, "r": R, "u": U}
KEYS = [*range(300), *(f"key-{i}" for i in range(100)), *((i, "t") for i in range(20))]


def _writer(key, states) -> None:
    n = len(str(key))
    states["v"].update(n * 1000 + 7)
    states["l"].add_all([f"{key}-a", f"{key}-b"])
    states["m"].put_all({1: str(key), 2: None})
    states["r"].add(3)
    states["r"].add(4)
    states["u"].update({"key": key, "set": frozenset({1, 2})})


def _expected(key) -> tuple:
    n = len(str(key))
    return (
        n * 1000 + 7,
        [f"{key}-a", f"{key}-b"],
        {1: str(key), 2: None},
        7,
        {"key": key, "set": frozenset({1, 2})},
    )


def _read(backend, key) -> tuple:
    backend.set_current_key(key)
    return (
        backend.get_partitioned_state(V).value(),
        list(backend.get_partitioned_state(L).get()),
        dict(backend.get_partitioned_state(M).items()),
        backend.get_partitioned_state(R).get(),
        backend.get_partitioned_state(U).value(),
    )


def _populate(
    harness: Harness,
    parallelism: int,
    checkpoint_id: int = 1,
    snapshot_type: str = SnapshotType.CHECKPOINT,
    keys=KEYS,
    backend=None,
):
    """Write every key into its subtask, commit, snapshot; returns the handles."""
    handles = []
    for i in range(parallelism):
        b = harness.create(i, parallelism, backend=backend)
        fill(b, keys, STATES, _writer)
        b.commit_local(1)
        handles.append(harness.snapshot(b, checkpoint_id, snapshot_type))
        b.close()
    return handles_of(handles)


def _check_restore(harness: Harness, handles, parallelism: int, keys=KEYS, backend=None) -> None:
    """Restore at ``parallelism``: each key on exactly its owner, with exact values."""
    seen: dict = {}
    for i in range(parallelism):
        b = harness.create(i, parallelism, backend=backend)
        b.restore(handles)
        for name in ("v", "l", "m", "r", "u"):
            for key in b.get_keys(name):
                assert owner(key, parallelism) == i, f"{key!r} restored on subtask {i}"
        for key in b.get_keys("v"):
            assert key not in seen, f"{key!r} restored twice"
            seen[key] = _read(b, key)
        b.close()
    assert seen == {k: _expected(k) for k in keys}


@pytest.mark.parametrize("snapshot_type", [SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT])
def test_round_trip_same_parallelism(harness, snapshot_type) -> None:
    handles = _populate(harness, 2, snapshot_type=snapshot_type)
    _check_restore(harness, handles, 2)


@pytest.mark.parametrize(("old", "new"), [(1, 4), (4, 2), (3, 7)])
def test_rescaling(harness, old, new) -> None:
    handles = _populate(harness, old)
    _check_restore(harness, handles, new)


# Key-group ranges that align with nothing, at high parallelism. RocksDB runs smaller
# parallelisms: its cost is one database open per subtask, and the range logic is shared.
@pytest.mark.parametrize(
    ("backend", "old", "new"),
    [
        ("heap", 15, 77),
        ("heap", 77, 15),
        ("rocksdb-incremental", 5, 13),
        ("rocksdb-incremental", 13, 5),
        ("rocksdb-full", 5, 13),
        ("rocksdb-full", 13, 5),
    ],
)
def test_rescaling_at_high_parallelism(backend, old, new, storage, tmp_path) -> None:
    harness = Harness(backend, storage, str(tmp_path))
    try:
        handles = _populate(harness, old)
        _check_restore(harness, handles, new)
    finally:
        harness.close_all()
        clear_heap_cache()


def test_savepoint_rescaling(harness) -> None:
    handles = _populate(harness, 3, snapshot_type=SnapshotType.SAVEPOINT)
    _check_restore(harness, handles, 5)


def test_empty_backend_snapshot_is_none(harness) -> None:
    b = harness.create()
    b.commit_local(1)
    assert harness.snapshot(b, 1) is None


def test_snapshot_is_consistent_while_updates_continue(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(V)
    for key in range(100):
        b.set_current_key(key)
        state.update(key)
    b.commit_local(1)
    upload = b.snapshot(1, harness.factory(1))
    for key in range(100):  # the next epoch runs before the upload
        b.set_current_key(key)
        state.update(-1)
    b.set_current_key(1000)
    state.update(1000)
    b.commit_local(2)
    handle = upload()
    restored = harness.create()
    restored.restore([handle])
    rstate = restored.get_partitioned_state(V)
    assert sorted(restored.get_keys("v")) == list(range(100))
    for key in range(100):
        restored.set_current_key(key)
        assert rstate.value() == key


def test_restore_replaces_existing_state(harness) -> None:
    b = harness.create()
    b.set_current_key("a")
    b.get_partitioned_state(V).update(1)
    b.commit_local(1)
    handle = harness.snapshot(b, 1)
    b.set_current_key("b")
    b.get_partitioned_state(V).update(2)
    b.commit_local(2)
    b.restore([handle])
    assert sorted(b.get_keys("v")) == ["a"]


def test_restored_state_can_be_updated_and_snapshotted_again(harness) -> None:
    handles = _populate(harness, 2)
    b = harness.create(0, 1)
    b.restore(handles)
    b.commit_local(10)
    for key in KEYS[:50]:
        b.set_current_key(key)
        b.get_partitioned_state(L).add("more")
    b.commit_local(11)
    handle = harness.snapshot(b, 2)
    again = harness.create(0, 1)
    again.restore([handle])
    for key in KEYS:
        extra = ["more"] if key in KEYS[:50] else []
        again.set_current_key(key)
        assert list(again.get_partitioned_state(L).get()) == [f"{key}-a", f"{key}-b", *extra]


@pytest.mark.parametrize(
    ("first", "second"),
    [("heap", "rocksdb-incremental"), ("rocksdb-incremental", "heap"), ("heap", "rocksdb-full")],
)
def test_switch_backend_through_savepoint(tmp_path, storage, first, second) -> None:
    """heap -> RocksDB -> heap (and back) through canonical savepoints, with rescaling."""
    h = Harness(first, storage, str(tmp_path))
    try:
        handles = _populate(h, 2, snapshot_type=SnapshotType.SAVEPOINT, backend=first)
        _check_restore(h, handles, 3, backend=second)
        moved = []
        for i in range(3):
            b = h.create(i, 3, backend=second)
            b.restore(handles)
            b.commit_local(2)
            moved.append(h.snapshot(b, 2, SnapshotType.SAVEPOINT))
            b.close()
        _check_restore(h, handles_of(moved), 1, backend=first)
    finally:
        h.close_all()


def test_heap_checkpoint_restores_into_rocksdb(tmp_path, storage) -> None:
    h = Harness("heap", storage, str(tmp_path))
    try:
        handles = _populate(h, 2, backend="heap")
        _check_restore(h, handles, 3, backend="rocksdb-incremental")
    finally:
        h.close_all()


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    old=st.integers(1, 9),
    new=st.integers(1, 9),
    keys=st.lists(
        st.one_of(st.integers(-(10**6), 10**6), st.text(max_size=6)),
        min_size=1,
        max_size=60,
        unique=True,
    ),
)
def test_property_every_key_restored_once(tmp_path_factory, old, new, keys) -> None:
    for kind in ("heap", "rocksdb-incremental"):
        h = Harness(kind, "memory", str(tmp_path_factory.mktemp("prop")))
        try:
            handles = _populate(h, old, keys=keys)
            _check_restore(h, handles, new, keys=keys)
        finally:
            h.close_all()


def test_max_parallelism_constant() -> None:
    assert MAX_P == 128
