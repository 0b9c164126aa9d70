"""Durable changelog: a checkpoint plus the change entries of later commits rebuild exactly
the state the backend had (deletes, new states, list/map state, untouched key groups)."""

from __future__ import annotations

import pytest

from sparkpoint.errors import RestoreError
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.typeinfo import Types

from .harness import handles_of

V = ValueStateDescriptor("v", Types.INT())
L = ListStateDescriptor("l", Types.INT())
M = MapStateDescriptor("m", Types.STRING(), Types.INT())
LATE = ValueStateDescriptor("late", Types.STRING())  # registered after the checkpoint
KEYS = [f"k{i}" for i in range(300)]


def _write(b, key, n) -> None:
    b.set_current_key(key)
    b.get_partitioned_state(V).update(n)
    b.get_partitioned_state(L).add(n)
    b.get_partitioned_state(M).put(str(n % 3), n)


def _dump(b) -> dict:
    out = {}
    for key in KEYS:
        b.set_current_key(key)
        late = (
            b.get_partitioned_state(LATE).value() if "late" in b.registered_state_names() else None
        )
        out[key] = (
            b.get_partitioned_state(V).value(),
            list(b.get_partitioned_state(L).get() or []),
            dict(b.get_partitioned_state(M).items()),
            late,
        )
    return out


def test_checkpoint_plus_changelog_rebuilds_the_state(harness) -> None:
    b = harness.create()
    assert b.track_changes() is True
    for i, key in enumerate(KEYS):
        _write(b, key, i)
    b.commit_local(1)
    assert b.take_changes() is not None
    base = handles_of([harness.snapshot(b, 1)])
    entries = []
    for epoch in (2, 3, 4):
        for i, key in enumerate(KEYS[: 40 * epoch]):
            if i % 7 == epoch:
                b.set_current_key(key)
                for d in (V, L, M):
                    b.get_partitioned_state(d).clear()  # deletes
            elif i % 5 == 0:
                _write(b, key, 1000 * epoch + i)
        if epoch == 3:
            b.set_current_key("k1")
            b.get_partitioned_state(LATE).update("late")
        b.commit_local(epoch)
        entry = b.take_changes()
        assert entry is not None and b.take_changes() is None
        entries.append(entry)
    b.commit_local(5)
    assert b.take_changes() is None  # nothing changed in epoch 5
    expected = _dump(b)

    restored = harness.create()
    restored.restore(base)
    restored.apply_changes(entries)
    restored.commit_local(4)
    assert _dump(restored) == expected
    restored.close()
    again = harness.create(local_dir=restored.params.local_dir)  # and it was committed
    assert _dump(again) == expected


def test_changelog_of_another_backend_is_refused(harness) -> None:
    b = harness.create()
    b.track_changes()
    _write(b, "k1", 1)
    b.commit_local(1)
    entry = b.take_changes()
    assert entry is not None
    other = harness.create(backend="rocksdb-full" if harness.backend == "heap" else "heap")
    with pytest.raises(RestoreError, match="cannot be applied"):
        other.apply_changes([entry])
    with pytest.raises(RestoreError, match="not a sparkpoint changelog"):
        b.apply_changes([b"garbage"])
