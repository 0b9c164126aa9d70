"""Operator state: list/union/broadcast round trips and redistribution on rescaling."""

from __future__ import annotations

import os

import pytest

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.common.typeinfo import Types
from sparkpoint.errors import RestoreError
from sparkpoint.fs import get_filesystem
from sparkpoint.state.descriptors import ListStateDescriptor, MapStateDescriptor
from sparkpoint.state.heap import DefaultOperatorStateBackend
from sparkpoint.state.operator_repartition import redistribute_operator_state


def snapshot_subtasks(n: int, factory) -> list:
    handles = []
    for i in range(n):
        b = DefaultOperatorStateBackend()
        b.get_list_state("offsets").add_all([(i, j) for j in range(i + 2)])
        b.get_union_list_state(ListStateDescriptor("u", Types.STRING())).add(f"u{i}")
        bc = b.get_broadcast_state(MapStateDescriptor("rules", Types.STRING(), Types.INT()))
        bc.put_all({"a": 1, "b": 2})
        handles.append([b.snapshot(factory)])
    return handles


@pytest.mark.parametrize("old_p,new_p", [(3, 1), (1, 4), (3, 5), (4, 2), (2, 2)])
def test_redistribution(old_p: int, new_p: int, tmp_path) -> None:
    chk = str(tmp_path)
    factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 64)
    old = snapshot_subtasks(old_p, factory)
    all_split = sorted((i, j) for i in range(old_p) for j in range(i + 2))
    new = redistribute_operator_state(old, new_p)
    assert len(new) == new_p
    got_split, sizes = [], []
    for handles in new:
        b = DefaultOperatorStateBackend(handles)
        part = list(b.get_list_state("offsets").get())
        got_split += part
        sizes.append(len(part))
        assert sorted(b.get_union_list_state(ListStateDescriptor("u", Types.STRING())).get()) == [
            f"u{i}" for i in range(old_p)]
        bc = b.get_broadcast_state(MapStateDescriptor("rules", Types.STRING(), Types.INT()))
        assert dict(bc.items()) == {"a": 1, "b": 2}
    assert sorted(got_split) == all_split
    assert max(sizes) - min(sizes) <= 1


def test_round_trip_and_errors() -> None:
    factory = MemCheckpointStreamFactory()
    b = DefaultOperatorStateBackend()
    assert b.snapshot(factory) is None
    s = b.get_list_state("s")
    s.update([1, 2])
    s.add(3)
    assert list(s.get()) == [1, 2, 3]
    with pytest.raises(ValueError, match="null"):
        s.add(None)
    with pytest.raises(ValueError, match="registered as SPLIT_DISTRIBUTE"):
        b.get_union_list_state("s")
    h = b.snapshot(factory)
    r = DefaultOperatorStateBackend([h])
    with pytest.raises(RestoreError, match="written as SPLIT_DISTRIBUTE"):
        r.get_union_list_state("s")
    # state never re-registered is carried into the next snapshot
    r2 = DefaultOperatorStateBackend([h])
    h2 = r2.snapshot(factory)
    assert list(DefaultOperatorStateBackend([h2]).get_list_state("s").get()) == [1, 2, 3]
    with pytest.raises(TypeError, match="ListStateDescriptor"):
        b.get_list_state(MapStateDescriptor("x", Types.INT(), Types.INT()))


def test_missing_file_is_restore_error(tmp_path) -> None:
    chk = str(tmp_path)
    factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 0)
    b = DefaultOperatorStateBackend()
    b.get_list_state("s").add("x" * 100)
    h = b.snapshot(factory)
    os.remove(h.delegate.path)
    with pytest.raises(RestoreError, match="missing"):
        DefaultOperatorStateBackend([h])
