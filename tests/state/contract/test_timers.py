"""Timers states (``timer_states``): every backend fires the same due timers in the same
order, keeps the rest, reverts a firing, and carries timers through checkpoints and
savepoints at another parallelism and across backends (RocksDB stores them in time order,
``RocksDBTimerTable``; snapshots hold the canonical MAP rows either way)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.state.backend import SnapshotType
from sparkpoint.state.descriptors import MapStateDescriptor
from sparkpoint.state.heap import clear_heap_cache
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.state.rocksdb.registry import read_registry
from sparkpoint.state.rocksdb.timer_table import TIMER_LAYOUT, RocksDBTimerTable
from sparkpoint.state.typeinfo import Types

from .harness import TIMERS, Harness, handles_of, owner

T = MapStateDescriptor(TIMERS, Types.PICKLED_BYTE_ARRAY(), Types.BOOLEAN())
EVENT, PROC = 0, 1
KEYS = [*range(60), *(f"key-{i}" for i in range(30))]


def _timers_of(key: Any) -> list[tuple[int, int]]:
    """Each key's timers: event-time ones before and after 500, one processing-time one
    (negative timestamps too: the layout orders them below zero)."""
    n = KEYS.index(key)
    return [(EVENT, n * 10 - 100), (EVENT, 1_000 + n), (PROC, 50 + n % 7)]


def _register(backend: Any, keys: list[Any]) -> None:
    for key in _owned(backend, keys):
        backend.set_current_key(key)
        timers = backend.get_partitioned_state(T)
        for user_key in _timers_of(key):
            timers.put(user_key, True)


def _owned(backend: Any, keys: list[Any]) -> list[Any]:
    p = backend.params.parallelism
    return [k for k in keys if owner(k, p) == backend.params.subtask_index]


def _expected_due(keys: list[Any], limits: tuple[int, int]) -> list[tuple[int, int, Any]]:
    return sorted(
        ((ts, d, key) for key in keys for d, ts in _timers_of(key) if ts <= limits[d]),
        key=lambda t: (t[0], t[1]),
    )


def _pop(backend: Any, limits: tuple[int, int]) -> tuple[list[Any], list[int | None]]:
    due, earliest = backend.pop_due_timers(TIMERS, limits)
    due.sort(key=lambda t: (t[0], t[1]))  # as the runtime does (stable)
    for _ts, _d, key, kg in due:
        backend.set_current_key(key)
        assert backend.current_key_group == kg
    return due, earliest


def test_due_timers_fire_once_in_order_and_the_rest_stay(harness) -> None:
    b = harness.create()
    _register(b, KEYS)
    b.commit_local(1)
    b.set_current_key(3)  # a pending timer, due, and a pending delete of a due one
    b.get_partitioned_state(T).put((EVENT, 400), True)
    b.get_partitioned_state(T).remove((EVENT, -70))
    limits = (500, 53)
    due, earliest = _pop(b, limits)
    expected = [t for t in _expected_due(KEYS, limits) if t != (-70, EVENT, 3)]
    expected = sorted([*expected, (400, EVENT, 3)], key=lambda t: (t[0], t[1]))
    assert sorted((ts, d, repr(k)) for ts, d, k, _kg in due) == sorted(
        (ts, d, repr(k)) for ts, d, k in expected
    )
    assert [(ts, d) for ts, d, _k, _kg in due] == [(ts, d) for ts, d, _k in expected]
    assert earliest == [510, 54]  # the first event-time timer after 500, and proc. after 53
    assert _pop(b, limits)[0] == []
    b.commit_local(2)
    rest, _ = _pop(b, (2**63 - 1, 2**63 - 1))
    assert len(rest) == 3 * len(KEYS) - len(due)
    # The firing of epoch 2 is undone with its commit.
    assert b.revert_to(1) is True
    again, _ = _pop(b, limits)
    # key 3: its removed timer is back, its pending extra one was never committed
    assert len(again) == len(due)
    assert (-70, EVENT, 3) in [(ts, d, k) for ts, d, k, _kg in again]


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 1)])
@pytest.mark.parametrize("kind", [SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT])
def test_timers_survive_snapshots_at_another_parallelism(harness, old, new, kind) -> None:
    handles = []
    for sub in range(old):
        b = harness.create(sub, old)
        _register(b, KEYS)
        b.commit_local(1)
        handles.append(harness.snapshot(b, 1, kind))
    limits = (300, 2**63 - 1)
    fired = []
    for sub in range(new):
        b = harness.create(sub, new)
        b.restore(handles_of(handles))
        b.commit_local(1)
        due, _ = _pop(b, limits)
        assert sorted(repr(k) for _ts, _d, k, _kg in due) == sorted(
            repr(k) for _ts, _d, k in _expected_due(_owned(b, KEYS), limits)
        )
        fired.extend(due)
    assert len(fired) == len(_expected_due(KEYS, limits))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("heap", "rocksdb-full"),
        ("rocksdb-incremental", "heap"),
        ("rocksdb-full", "heap"),
    ],
)
def test_timers_move_between_backends_through_savepoints(storage, tmp_path, first, second) -> None:
    harness = Harness(first, storage, str(tmp_path))
    try:
        b = harness.create(0, 2)
        _register(b, KEYS)
        b.commit_local(1)
        handle = harness.snapshot(b, 1, SnapshotType.SAVEPOINT)
        other = harness.create(0, 2, backend=second)
        other.restore(handles_of([handle]))
        other.commit_local(1)
        due, _ = _pop(other, (2**63 - 1, 2**63 - 1))
        assert sorted((ts, d, repr(k)) for ts, d, k, _kg in due) == sorted(
            (ts, d, repr(k)) for ts, d, k in _expected_due(_owned(b, KEYS), (2**63 - 1, 2**63 - 1))
        )
    finally:
        harness.close_all()
        clear_heap_cache()


def test_rocksdb_keeps_timers_in_time_order(tmp_path) -> None:
    """The timers state gets the timer layout (recorded in the registry); another MAP state
    keeps the standard one."""
    harness = Harness("rocksdb-full", "memory", str(tmp_path))
    try:
        b = harness.create()
        assert isinstance(b, RocksDBKeyedStateBackend)
        _register(b, KEYS)
        b.get_partitioned_state(MapStateDescriptor("m", Types.INT(), Types.INT())).put(1, 1)
        b.commit_local(1)
        registry = read_registry(b.local_db.db)
        assert registry[TIMERS].layout == TIMER_LAYOUT
        assert registry["m"].layout is None
        assert isinstance(b._tables[TIMERS], RocksDBTimerTable)
    finally:
        harness.close_all()


@pytest.mark.parametrize("incremental", [True, False])
def test_timers_in_the_standard_layout_are_converted(tmp_path, incremental) -> None:
    """A checkpoint whose timers are in the standard layout (written before the timer
    layout existed) restores into the timer layout, with every timer."""
    kind = "rocksdb-incremental" if incremental else "rocksdb-full"
    harness = Harness(kind, "filesystem", str(tmp_path))
    try:
        old = harness.create(timer_states=frozenset())
        _register(old, KEYS)
        old.commit_local(1)
        assert read_registry(old.local_db.db)[TIMERS].layout is None
        handle = harness.snapshot(old, 1)
        new = harness.create()
        new.restore(handles_of([handle]))
        assert read_registry(new.local_db.db)[TIMERS].layout == TIMER_LAYOUT
        new.commit_local(1)
        due, _ = _pop(new, (2**63 - 1, 2**63 - 1))
        assert len(due) == 3 * len(KEYS)
        # Reopening the converted database from disk keeps the layout and the timers gone.
        new.commit_local(2)
        local = new.params.local_dir
        new.close()
        again = harness.create(local_dir=local)
        assert again.local_epoch() == 2
        assert _pop(again, (2**63 - 1, 2**63 - 1))[0] == []
    finally:
        harness.close_all()
