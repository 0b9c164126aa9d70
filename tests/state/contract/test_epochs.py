"""Local epoch commits: atomic, persistent across backend instances, one-step revert."""

from __future__ import annotations

from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.typeinfo import Types

V = ValueStateDescriptor("v", Types.INT())
L = ListStateDescriptor("l", Types.INT())
M = MapStateDescriptor("m", Types.STRING(), Types.INT())


def _write(b, key, n) -> None:
    b.set_current_key(key)
    b.get_partitioned_state(V).update(n)
    b.get_partitioned_state(L).add(n)
    b.get_partitioned_state(M).put(str(n), n)


def _read(b, key):
    b.set_current_key(key)
    return (
        b.get_partitioned_state(V).value(),
        list(b.get_partitioned_state(L).get()),
        dict(b.get_partitioned_state(M).items()),
    )


def test_fresh_backend_has_no_epoch(harness) -> None:
    b = harness.create()
    assert b.local_epoch() is None
    assert b.local_extra() == b""
    assert b.revert_to(0) is False


def test_commit_survives_reopen_in_a_new_instance(harness) -> None:
    b = harness.create()
    local_dir = b.params.local_dir
    _write(b, "a", 1)
    b.commit_local(1, b"timers-1")
    _write(b, "a", 2)  # never committed
    b.close()
    again = harness.create(local_dir=local_dir)
    assert again.local_epoch() == 1
    assert again.local_extra() == b"timers-1"
    assert _read(again, "a") == (1, [1], {"1": 1})


def test_revert_undoes_exactly_the_last_commit(harness) -> None:
    b = harness.create()
    _write(b, "a", 1)
    b.commit_local(5, b"e5")
    _write(b, "a", 2)
    _write(b, "b", 2)
    b.commit_local(6, b"e6")
    assert _read(b, "a") == (2, [1, 2], {"1": 1, "2": 2})
    assert b.revert_to(5) is True
    assert b.local_epoch() == 5
    assert b.local_extra() == b"e5"
    assert _read(b, "a") == (1, [1], {"1": 1})
    assert _read(b, "b") == (None, [], {})
    assert b.revert_to(4) is False  # only one step back
    assert b.local_epoch() == 5


def test_retried_epoch_is_applied_once(harness) -> None:
    """A Spark retry: the task sees epoch 6 committed, reverts to 5 and re-runs epoch 6."""
    b = harness.create()
    local_dir = b.params.local_dir
    _write(b, "k", 1)
    b.commit_local(5)
    b.set_current_key("k")
    b.get_partitioned_state(L).add(100)
    b.commit_local(6)
    b.close()
    retry = harness.create(local_dir=local_dir)
    assert retry.local_epoch() == 6
    assert retry.revert_to(5) is True
    retry.set_current_key("k")
    retry.get_partitioned_state(L).add(100)
    retry.commit_local(6)
    assert _read(retry, "k")[1] == [1, 100]


def test_revert_to_current_epoch_drops_uncommitted_changes(harness) -> None:
    b = harness.create()
    _write(b, "a", 1)
    b.commit_local(1)
    _write(b, "a", 9)
    assert b.revert_to(1) is True
    assert _read(b, "a") == (1, [1], {"1": 1})


def test_revert_after_reopen(harness) -> None:
    b = harness.create()
    local_dir = b.params.local_dir
    _write(b, "a", 1)
    b.commit_local(1)
    _write(b, "a", 2)
    b.commit_local(2)
    b.close()
    again = harness.create(local_dir=local_dir)
    assert again.revert_to(1) is True
    assert _read(again, "a") == (1, [1], {"1": 1})


def test_pop_map_entries_removes_exactly_the_selected_and_reverts(harness) -> None:
    """Timers fire through ``pop_map_entries``: committed, pending and new entries, over
    every key group; a popped entry comes back when its commit is reverted."""
    b = harness.create()
    keys = [f"k{i}" for i in range(40)]
    for i, key in enumerate(keys):
        b.set_current_key(key)
        b.get_partitioned_state(M).put(str(i), i)
        b.get_partitioned_state(M).put("x" + str(i), -i)
    b.commit_local(1)
    b.set_current_key("k3")
    b.get_partitioned_state(M).put("3", 300)  # pending overwrite of a committed entry
    b.set_current_key("new")
    b.get_partitioned_state(M).put("7", 7)  # a pending-only entry
    seen: list[str] = []

    def select(user_key: str) -> bool:
        seen.append(user_key)
        return not user_key.startswith("x") and int(user_key) % 2 == 1

    popped = b.pop_map_entries("m", select)
    expected = {(f"k{i}", str(i)) for i in range(1, 40, 2)} | {("new", "7")}
    assert {(key, uk) for _kg, key, uk in popped} == expected
    assert len(popped) == len(expected)  # each once
    assert len(seen) == 81  # every entry was looked at once
    for kg, key, _uk in popped:
        b.set_current_key(key)
        assert b.current_key_group == kg
    b.set_current_key("k3")
    assert dict(b.get_partitioned_state(M).items()) == {"x3": -3}
    b.set_current_key("new")
    assert dict(b.get_partitioned_state(M).items()) == {}
    assert b.pop_map_entries("m", select) == []
    b.commit_local(2)
    assert b.revert_to(1) is True
    for i, key in enumerate(keys):
        b.set_current_key(key)
        assert dict(b.get_partitioned_state(M).items()) == {str(i): i, "x" + str(i): -i}
    b.set_current_key("new")
    assert dict(b.get_partitioned_state(M).items()) == {}
    assert b.pop_map_entries("absent", select) == []
