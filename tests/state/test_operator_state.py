"""Broadcast operator state: round trips, restore errors and the copy each new subtask
takes on rescaling."""

from __future__ import annotations

import os

import pytest

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import (
    OperatorStateDistributionMode,
    OperatorStateHandle,
    StateMetaInfo,
)
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.common.typeinfo import Types
from sparkpoint.errors import RestoreError
from sparkpoint.fs import get_filesystem
from sparkpoint.state.descriptors import ListStateDescriptor, MapStateDescriptor
from sparkpoint.state.heap import DefaultOperatorStateBackend
from sparkpoint.state.operator_repartition import redistribute_operator_state


def test_several_states_round_trip_at_any_parallelism(tmp_path) -> None:
    """Two broadcast states in one handle per subtask: after redistribution to 1..5
    subtasks every new subtask has both, entry for entry, through a file or inline."""
    chk = str(tmp_path)
    for threshold in (0, 1 << 20):  # every stream a file; every stream inline
        factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, threshold)
        a = MapStateDescriptor("a", Types.STRING(), Types.INT())
        b = MapStateDescriptor("b", Types.INT(), Types.PICKLED_BYTE_ARRAY())
        old = []
        for _ in range(3):
            backend = DefaultOperatorStateBackend()
            backend.get_broadcast_state(a).put_all({"x": 1, "y": 2})
            backend.get_broadcast_state(b).put(7, ("any", [1.5]))
            old.append([backend.snapshot(factory)])
        for new_p in range(1, 6):
            for handles in redistribute_operator_state(old, new_p):
                restored = DefaultOperatorStateBackend(handles)
                assert dict(restored.get_broadcast_state(a).items()) == {"x": 1, "y": 2}
                assert dict(restored.get_broadcast_state(b).items()) == {7: ("any", [1.5])}


def test_restore_errors() -> None:
    factory = MemCheckpointStreamFactory()
    with pytest.raises(TypeError, match="MapStateDescriptor"):
        DefaultOperatorStateBackend().get_broadcast_state(ListStateDescriptor("l", Types.INT()))
    b = DefaultOperatorStateBackend()
    b.get_broadcast_state(MapStateDescriptor("m", Types.INT(), Types.INT())).put(1, 2)
    h = b.snapshot(factory)
    split = OperatorStateHandle(
        {
            "m": StateMetaInfo(
                h.state_name_to_partition_offsets["m"].offsets,
                OperatorStateDistributionMode.SPLIT_DISTRIBUTE,
            )
        },
        h.delegate,
    )
    with pytest.raises(RestoreError, match="only broadcast state"):
        redistribute_operator_state([[split]], 2)
    with pytest.raises(RestoreError, match="only broadcast state"):
        DefaultOperatorStateBackend([split])
    with pytest.raises(ValueError, match="new_parallelism"):
        redistribute_operator_state([[h]], 0)


def test_missing_file_is_restore_error(tmp_path) -> None:
    chk = str(tmp_path)
    factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 0)
    b = DefaultOperatorStateBackend()
    b.get_broadcast_state(MapStateDescriptor("m", Types.STRING(), Types.STRING())).put(
        "k", "x" * 100
    )
    h = b.snapshot(factory)
    os.remove(h.delegate.path)
    with pytest.raises(RestoreError, match="missing"):
        DefaultOperatorStateBackend([h])


RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())


def _broadcast_copies(old_p: int, factory) -> list:
    """One handle list per old subtask; subtask i's copy is marked with ``("copy", i)`` so
    the test can tell which copy a new subtask took (real copies are identical)."""
    handles = []
    for i in range(old_p):
        b = DefaultOperatorStateBackend()
        bc = b.get_broadcast_state(RULES)
        bc.put_all({"a": 1, "copy": i})
        handles.append([b.snapshot(factory)])
    return handles


@pytest.mark.parametrize(
    "old_p,new_p,expected",
    [
        (2, 3, [0, 1, 0]),  # growing: new subtask i takes old copy i % 2
        (3, 1, [0]),  # shrinking: new subtask i takes old copy i
        (3, 2, [0, 1]),
        (1, 4, [0, 0, 0, 0]),
    ],
)
def test_broadcast_state_each_new_subtask_takes_one_copy(
    old_p: int, new_p: int, expected: list[int], tmp_path
) -> None:
    chk = str(tmp_path)
    factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 0)
    new = redistribute_operator_state(_broadcast_copies(old_p, factory), new_p)
    copies = []
    for handles in new:
        assert len(handles) == 1  # exactly one copy, never a merge of several
        state = DefaultOperatorStateBackend(handles).get_broadcast_state(RULES)
        assert state.get("a") == 1
        copies.append(state.get("copy"))
    assert copies == expected


def test_broadcast_state_round_trip_and_read_only_view() -> None:
    """Snapshot -> restore keeps every entry; the read-only view shares the entries and
    has no writers; a restored state nobody re-registers is carried to the next snapshot."""
    factory = MemCheckpointStreamFactory()
    b = DefaultOperatorStateBackend()
    state = b.get_broadcast_state(RULES)
    view = state.read_only()
    state.put("x", 1)
    state["y"] = 2
    assert view.get("x") == 1 and "y" in view and view["y"] == 2
    assert sorted(view) == ["x", "y"] and not view.is_empty()
    assert not hasattr(view, "put") and not hasattr(view, "remove")
    del state["x"]
    assert dict(view.items()) == {"y": 2}
    h = b.snapshot(factory)
    restored = DefaultOperatorStateBackend([h])
    assert dict(restored.get_broadcast_state(RULES).items()) == {"y": 2}
    carried = DefaultOperatorStateBackend([h]).snapshot(factory)  # never re-registered
    again = DefaultOperatorStateBackend([carried]).get_broadcast_state(RULES)
    assert dict(again.items()) == {"y": 2}
    empty = DefaultOperatorStateBackend()
    empty.get_broadcast_state(RULES)
    assert empty.snapshot(factory) is None  # empty broadcast state: nothing to write
