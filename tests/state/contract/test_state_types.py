"""Every state type behaves identically on every backend (the state API contract)."""

from __future__ import annotations

import pytest

from sparkpoint.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.functions import AggregateFunction
from sparkpoint.state.typeinfo import Types


class AvgAggregate(AggregateFunction):
    """Average of ints, accumulator (sum, count)."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]


def test_value_state(harness) -> None:
    b = harness.create()
    desc = ValueStateDescriptor("v", Types.LONG())
    b.set_current_key("a")
    state = b.get_partitioned_state(desc)
    assert state.value() is None
    state.update(7)
    assert state.value() == 7
    b.set_current_key("b")
    assert state.value() is None
    state.update(-3)
    b.set_current_key("a")
    assert state.value() == 7
    state.update(None)  # None clears, as in Flink
    assert state.value() is None
    b.set_current_key("b")
    state.clear()
    assert state.value() is None
    assert b.get_partitioned_state(desc) is state


def test_untyped_value_state_holds_any_picklable(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(ValueStateDescriptor("any"))
    b.set_current_key(("tuple", 1))
    state.update({"nested": [1, 2, {"x": None}]})
    assert state.value() == {"nested": [1, 2, {"x": None}]}


def test_list_state(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(ListStateDescriptor("l", Types.STRING()))
    b.set_current_key(1)
    assert list(state.get()) == []
    state.add("x")
    state.add_all(["y", "z"])
    assert list(state.get()) == ["x", "y", "z"]
    state.update(["q"])
    assert list(state.get()) == ["q"]
    with pytest.raises(ValueError, match="null"):
        state.add(None)
    state.update([])
    assert list(state.get()) == []
    state.add("w")
    state.clear()
    assert list(state.get()) == []


def test_map_state(harness) -> None:
    b = harness.create()
    state = b.get_partitioned_state(MapStateDescriptor("m", Types.STRING(), Types.INT()))
    b.set_current_key(42)
    assert state.is_empty()
    state.put("a", 1)
    state.put_all({"b": 2, "c": None})
    assert state.get("a") == 1
    assert state.get("c") is None
    assert state.contains("c")
    assert not state.contains("zz")
    assert sorted(state.keys()) == ["a", "b", "c"]
    assert sorted(state.items(), key=lambda kv: kv[0]) == [("a", 1), ("b", 2), ("c", None)]
    assert sorted(v for v in state.values() if v is not None) == [1, 2]
    state.remove("a")
    assert "a" not in state
    assert not state.is_empty()
    b.set_current_key(43)
    assert state.is_empty()
    state["k"] = 5
    assert state["k"] == 5
    b.set_current_key(42)
    state.clear()
    assert state.is_empty()
    b.set_current_key(43)
    assert list(state.items()) == [("k", 5)]


def test_reducing_and_aggregating_state(harness) -> None:
    b = harness.create()
    red = b.get_partitioned_state(ReducingStateDescriptor("r", lambda x, y: x + y, Types.INT()))
    agg = b.get_partitioned_state(AggregatingStateDescriptor("g", AvgAggregate()))
    b.set_current_key("k")
    assert red.get() is None
    assert agg.get() is None
    for v in (1, 2, 3, 10):
        red.add(v)
        agg.add(v)
    assert red.get() == 16
    assert agg.get() == 4.0
    with pytest.raises(ValueError):
        red.add(None)
    red.clear()
    assert red.get() is None


def test_get_keys_lists_every_key_once(harness) -> None:
    b = harness.create()
    m = b.get_partitioned_state(MapStateDescriptor("m", Types.INT(), Types.INT()))
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.INT()))
    for key in range(50):
        b.set_current_key(key)
        m.put(1, key)
        m.put(2, key)
        if key % 2:
            v.update(key)
    assert sorted(b.get_keys("m")) == list(range(50))
    assert sorted(b.get_keys("v")) == list(range(1, 50, 2))
    assert list(b.get_keys("unknown")) == []


def test_state_kind_clash_is_refused(harness) -> None:
    b = harness.create()
    b.get_partitioned_state(ValueStateDescriptor("s", Types.INT()))
    with pytest.raises(ValueError, match="registered as VALUE"):
        b.get_partitioned_state(ListStateDescriptor("s", Types.INT()))


def test_key_outside_range_is_refused(harness) -> None:
    b = harness.create(subtask=0, parallelism=4)
    from .harness import owner

    foreign = next(k for k in range(1000) if owner(k, 4) != 0)
    with pytest.raises(ValueError, match="not in"):
        b.set_current_key(foreign)
