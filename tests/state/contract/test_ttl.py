"""TTL: expired entries are never returned, refresh rules, and TTL across snapshots."""

from __future__ import annotations

from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.ttl import StateTtlConfig
from sparkpoint.state.typeinfo import Types

TTL = 1000


def _ttl(builder_fn=None) -> StateTtlConfig:
    builder = StateTtlConfig.new_builder(TTL)
    if builder_fn is not None:
        builder = builder_fn(builder)
    return builder.build()


def _value(name="v", cfg=None) -> ValueStateDescriptor:
    d = ValueStateDescriptor(name, Types.INT())
    d.enable_time_to_live(cfg or _ttl())
    return d


def test_value_expires(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(_value())
    b.set_current_key("k")
    state.update(1)
    harness.clock.advance(TTL - 1)
    assert state.value() == 1
    harness.clock.advance(1)
    assert state.value() is None


def test_on_create_and_write_does_not_refresh_on_read(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(_value())
    b.set_current_key("k")
    state.update(1)
    harness.clock.advance(600)
    assert state.value() == 1
    harness.clock.advance(600)
    assert state.value() is None


def test_on_read_and_write_refreshes(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(_value(cfg=_ttl(lambda x: x.update_ttl_on_read_and_write())))
    b.set_current_key("k")
    state.update(1)
    harness.clock.advance(600)
    assert state.value() == 1
    harness.clock.advance(600)
    assert state.value() == 1
    harness.clock.advance(TTL)
    assert state.value() is None


def test_return_expired_if_not_cleaned_up(harness) -> None:
    b = harness.create()
    # Without background cleanup nothing removes the entry before the first read.
    cfg = _ttl(lambda x: x.return_expired_if_not_cleaned_up().disable_cleanup_in_background())
    state = b.get_partitioned_state(_value(cfg=cfg))
    b.set_current_key("k")
    state.update(1)
    harness.clock.advance(TTL)
    assert state.value() == 1  # returned once, then cleaned up on access
    assert state.value() is None


def test_list_elements_and_map_entries_expire_one_by_one(harness) -> None:
    b = harness.create()
    ld = ListStateDescriptor("l", Types.INT())
    ld.enable_time_to_live(_ttl())
    md = MapStateDescriptor("m", Types.STRING(), Types.INT())
    md.enable_time_to_live(_ttl())
    lst = b.get_partitioned_state(ld)
    mp = b.get_partitioned_state(md)
    b.set_current_key(1)
    lst.add(1)
    mp.put("old", 1)
    harness.clock.advance(600)
    lst.add(2)
    mp.put("new", 2)
    harness.clock.advance(600)
    assert list(lst.get()) == [2]
    assert dict(mp.items()) == {"new": 2}
    assert not mp.contains("old")
    harness.clock.advance(600)
    assert list(lst.get()) == []
    assert mp.is_empty()


def test_ttl_timestamps_survive_snapshot_and_restore(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(_value())
    b.set_current_key("k")
    state.update(5)
    b.commit_local(1)
    handle = harness.snapshot(b, 1)
    restored = harness.create()
    restored.restore([handle])
    rstate = restored.get_partitioned_state(_value())
    restored.set_current_key("k")
    harness.clock.advance(TTL - 1)
    assert rstate.value() == 5
    harness.clock.advance(1)
    assert rstate.value() is None


def test_expired_entries_are_not_restored_when_cleanup_in_snapshot(harness) -> None:
    """Full-snapshot cleanup (heap, RocksDB full) or the RocksDB cleanup scan (incremental)."""
    b = harness.create()
    cfg = _ttl(lambda x: x.cleanup_full_snapshot().return_expired_if_not_cleaned_up())
    state = b.get_partitioned_state(_value(cfg=cfg))
    for key in range(20):
        b.set_current_key(key)
        state.update(key)
    harness.clock.advance(TTL // 2)
    for key in range(10):
        b.set_current_key(key)
        state.update(key + 100)
    b.commit_local(1)
    harness.clock.advance(TTL // 2 + 1)  # keys 10..19 expired, 0..9 alive
    handle = harness.snapshot(b, 1)
    restored = harness.create()
    restored.restore([handle])
    rstate = restored.get_partitioned_state(_value(cfg=cfg))
    assert sorted(restored.get_keys("v")) == list(range(10))
    for key in range(10):
        restored.set_current_key(key)
        assert rstate.value() == key + 100
