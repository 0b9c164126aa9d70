"""A state re-registered with other serializers keeps its values (migration), survives a
reopen, and a reverted migration leaves the old state intact."""

from __future__ import annotations

from sparkpoint.state.descriptors import MapStateDescriptor, ValueStateDescriptor
from sparkpoint.state.typeinfo import Types

OLD = ValueStateDescriptor("v", Types.INT())
NEW = ValueStateDescriptor("v", Types.LONG())


def _fill(harness):
    b = harness.create()
    state = b.get_partitioned_state(OLD)
    m = b.get_partitioned_state(MapStateDescriptor("m", Types.INT(), Types.INT()))
    for key in range(20):
        b.set_current_key(key)
        state.update(key * 3)
        m.put(key, key)
    b.commit_local(1)
    local_dir = b.params.local_dir
    b.close()
    return local_dir


def _values(b, desc):
    state = b.get_partitioned_state(desc)
    out = {}
    for key in range(20):
        b.set_current_key(key)
        out[key] = state.value()
    return out


def test_migration_keeps_values(harness) -> None:
    local_dir = _fill(harness)
    b = harness.create(local_dir=local_dir)
    assert _values(b, NEW) == {k: k * 3 for k in range(20)}
    b.commit_local(2)
    b.close()
    again = harness.create(local_dir=local_dir)
    assert _values(again, NEW) == {k: k * 3 for k in range(20)}
    assert sorted(again.get_keys("v")) == list(range(20))
    m = again.get_partitioned_state(MapStateDescriptor("m", Types.INT(), Types.INT()))
    again.set_current_key(7)
    assert dict(m.items()) == {7: 7}


def test_reverted_migration_restores_the_old_state(harness) -> None:
    local_dir = _fill(harness)
    b = harness.create(local_dir=local_dir)
    _values(b, NEW)
    b.commit_local(2)
    assert b.revert_to(1) is True
    b.close()
    again = harness.create(local_dir=local_dir)
    assert again.local_epoch() == 1
    assert _values(again, OLD) == {k: k * 3 for k in range(20)}
