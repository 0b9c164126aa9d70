"""Heap keyed backend: state semantics, TTL, local commits, copy-on-write snapshots, rescale."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import FileStateHandle, KeyGroupsSavepointStateHandle
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common.typeinfo import Types
from sparkpoint.errors import RestoreError
from sparkpoint.fs import get_filesystem
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.functions import AggregateFunction
from sparkpoint.state.heap import HeapKeyedStateBackend, cached_state_dirs, clear_heap_cache
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.state.ttl import StateTtlConfig
from sparkpoint.testing import ManualClock

MAX_P = 128


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_heap_cache()
    yield
    clear_heap_cache()


def make(tmp_path, index=0, parallelism=1, sub="a", clock=SYSTEM_CLOCK, max_p=MAX_P, key_ser=None):
    rng = compute_key_group_range_for_operator_index(max_p, parallelism, index)
    return HeapKeyedStateBackend(
        KeyedStateBackendParameters(
            "job",
            "op",
            index,
            parallelism,
            max_p,
            rng,
            os.path.join(str(tmp_path), sub),
            clock,
            key_ser,
        )
    )


class Avg(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]


def test_all_state_kinds(tmp_path) -> None:
    b = make(tmp_path)
    b.set_current_key("k")
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.INT()))
    assert v.value() is None
    v.update(5)
    assert v.value() == 5
    v.update(None)
    assert v.value() is None
    li = b.get_partitioned_state(ListStateDescriptor("l", Types.STRING()))
    assert list(li.get()) == []
    li.add("a")
    li.add_all(["b", "c"])
    got = li.get()
    got.append("mutating the result changes nothing")
    assert list(li.get()) == ["a", "b", "c"]
    li.update(["z"])
    assert list(li.get()) == ["z"]
    with pytest.raises(ValueError, match="null"):
        li.add(None)
    m = b.get_partitioned_state(MapStateDescriptor("m", Types.STRING(), Types.LONG()))
    assert m.is_empty()
    m.put("x", 1)
    m.put_all({"y": 2, "n": None})
    assert m.get("x") == 1 and m.contains("n") and m.get("n") is None
    assert sorted(m.keys()) == ["n", "x", "y"] and dict(m.items()) == {"x": 1, "y": 2, "n": None}
    m.remove("x")
    assert "x" not in m and sorted(m) == ["n", "y"]
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda a, c: a + c, Types.LONG()))
    r.add(3)
    r.add(4)
    assert r.get() == 7
    a = b.get_partitioned_state(
        AggregatingStateDescriptor("a", Avg(), Types.TUPLE([Types.LONG()] * 2))
    )
    a.add(2)
    a.add(4)
    assert a.get() == 3.0
    b.set_current_key("other")
    assert v.value() is None and list(li.get()) == [] and m.is_empty() and r.get() is None
    assert sorted(b.get_keys("m")) == ["k"]
    for s in (li, m, r, a):
        b.set_current_key("k")
        s.clear()
    assert list(li.get()) == [] and m.is_empty() and r.get() is None and a.get() is None
    with pytest.raises(ValueError, match="registered as VALUE"):
        b.get_partitioned_state(ListStateDescriptor("v", Types.INT()))


def test_key_outside_range_rejected(tmp_path) -> None:
    b = make(tmp_path, index=1, parallelism=2)
    with pytest.raises(ValueError, match="is not in KeyGroupRange"):
        b.set_current_key(0)  # key group 33 belongs to subtask 0


def test_ttl_never_return_expired_and_update_on_read(tmp_path) -> None:
    clock = ManualClock(1_000)
    b = make(tmp_path, clock=clock)
    ttl = StateTtlConfig.new_builder(100).update_ttl_on_read_and_write().build()
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(ttl)
    ld = ListStateDescriptor("l", Types.INT())
    ld.enable_time_to_live(StateTtlConfig.new_builder(100).build())
    md = MapStateDescriptor("m", Types.INT(), Types.INT())
    md.enable_time_to_live(StateTtlConfig.new_builder(100).build())
    b.set_current_key(1)
    v, li, m = (b.get_partitioned_state(x) for x in (d, ld, md))
    v.update(7)
    li.add(1)
    m.put(1, 1)
    clock.ms += 60
    li.add(2)
    m.put(2, 2)
    assert v.value() == 7  # read refreshes to t=1060
    clock.ms += 60  # 1120: first list element / map entry expired (1000 + 100 <= 1120)
    assert v.value() == 7
    assert list(li.get()) == [2] and dict(m.items()) == {2: 2}
    clock.ms += 100  # 1220: value last read at 1120 -> expired at 1220
    assert v.value() is None and list(li.get()) == [] and m.is_empty()
    assert list(b.get_keys("v")) == []


def test_ttl_return_expired_if_not_cleaned_up(tmp_path) -> None:
    clock = ManualClock(1_000)
    b = make(tmp_path, clock=clock)
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(
        StateTtlConfig.new_builder(10)
        .return_expired_if_not_cleaned_up()
        .disable_cleanup_in_background()
        .build()
    )
    b.set_current_key(1)
    v = b.get_partitioned_state(d)
    v.update(3)
    clock.ms += 50
    assert v.value() == 3  # returned once, then cleaned up
    assert v.value() is None


def test_ttl_cleanup_full_snapshot(tmp_path) -> None:
    clock = ManualClock(1_000)
    b = make(tmp_path, clock=clock)
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(StateTtlConfig.new_builder(100).cleanup_full_snapshot().build())
    v = b.get_partitioned_state(d)
    for k in range(10):
        b.set_current_key(k)
        v.update(k)
        clock.ms += 20
    factory = MemCheckpointStreamFactory()
    for kind in (SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT):
        h = b.snapshot(1, factory, kind)()
        r = make(tmp_path, sub="r" + kind, clock=clock)
        r.restore([h])
        # now = 1200: written at t <= 1100 (k <= 5) expired
        assert sorted(r.get_keys("v")) == [6, 7, 8, 9]


def test_local_commit_revert_and_cache(tmp_path) -> None:
    d = ValueStateDescriptor("v", Types.LONG())
    b = make(tmp_path)
    assert b.local_epoch() is None
    v = b.get_partitioned_state(d)
    for k in range(50):
        b.set_current_key(k)
        v.update(k)
    b.commit_local(1, b"x1")
    b.set_current_key(3)
    v.update(300)
    b.commit_local(2, b"x2")
    assert (b.local_epoch(), b.local_extra()) == (2, b"x2")
    b.set_current_key(4)
    v.update(400)  # uncommitted: must not survive a reopen
    b.close()
    b = make(tmp_path)
    assert b.local_epoch() == 2
    v = b.get_partitioned_state(d)
    b.set_current_key(4)
    assert v.value() == 4
    b.set_current_key(3)
    assert v.value() == 300
    assert b.revert_to(1) and b.local_epoch() == 1 and b.local_extra() == b"x1"
    v = b.get_partitioned_state(d)
    b.set_current_key(3)
    assert v.value() == 3
    assert not b.revert_to(0)
    b.close()
    # the cached tables are adopted (same objects) when the marker matches
    b2 = make(tmp_path)
    assert b2.local_epoch() == 1
    b2.set_current_key(3)
    assert b2.get_partitioned_state(d).value() == 3
    files = sorted(os.listdir(os.path.join(str(tmp_path), "a", "heap")))
    assert "MARKER.json" in files


def test_commit_writes_only_the_changed_keys(tmp_path) -> None:
    b = make(tmp_path)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    for k in range(500):
        b.set_current_key(k)
        v.update(k)
    b.commit_local(1)
    heap_dir = os.path.join(str(tmp_path), "a", "heap")
    before = set(os.listdir(heap_dir))
    b.set_current_key(0)
    v.update(-1)
    b.commit_local(2)
    new = set(os.listdir(heap_dir)) - before
    assert new == {f"delta-{b._marker['token']}.pkl"}  # one delta, no key group rewritten
    with open(os.path.join(heap_dir, f"delta-{b._marker['token']}.pkl"), "rb") as f:
        per_group = pickle.loads(f.read())  # each key group's delta pickled apart
    assert {kg: pickle.loads(d) for kg, d in per_group.items()} == {
        33: [("v", {0: -1}, [])]
    }  # key 0: key group 33


def _values(b, d, keys):  # type: ignore[no-untyped-def]
    v = b.get_partitioned_state(d)
    out = {}
    for k in keys:
        b.set_current_key(k)
        out[k] = v.value()
    return out


def test_deltas_reload_revert_and_compact_into_whole_key_groups(tmp_path) -> None:
    """Reopening without the worker cache applies the deltas over the key-group files in
    order; a revert goes back one delta; deltas adding up to more keys than a key group
    holds make the next commit rewrite it whole."""
    d = ValueStateDescriptor("v", Types.LONG())
    m = MapStateDescriptor("m", Types.LONG(), Types.LONG())
    b = make(tmp_path)
    keys = list(range(300))
    model: dict[int, int | None] = {}
    for k in keys:
        b.set_current_key(k)
        b.get_partitioned_state(d).update(k)
        b.get_partitioned_state(m).put(k, k)
        model[k] = k
    b.commit_local(1)
    heap_dir = os.path.join(str(tmp_path), "a", "heap")
    history = [dict(model)]
    for epoch in range(2, 9):
        for k in keys[epoch::7]:
            b.set_current_key(k)
            if k % 5 == 0:
                b.get_partitioned_state(d).clear()
                b.get_partitioned_state(m).remove(k)
                model[k] = None
            else:
                b.get_partitioned_state(d).update(k * epoch)
                b.get_partitioned_state(m).put(k, k * epoch)
                model[k] = k * epoch
        b.commit_local(epoch)
        history.append(dict(model))
        b.close()
        clear_heap_cache()  # reload from the files
        b = make(tmp_path)
        assert b.local_epoch() == epoch
        assert _values(b, d, keys) == model
        mv = b.get_partitioned_state(m)
        for k in keys:
            b.set_current_key(k)
            assert mv.get(k) == model[k]
    names = os.listdir(heap_dir)
    assert any(n.startswith("delta-") for n in names)
    assert b._marker["chain"]  # some key groups carry deltas
    assert b.revert_to(7) is True
    assert _values(b, d, keys) == history[-2]
    b.close()
    clear_heap_cache()
    b = make(tmp_path)
    assert b.local_epoch() == 7
    assert _values(b, d, keys) == history[-2]
    # files no marker references are gone
    marker = b._marker
    referenced = {"MARKER.json"}
    for commit in (marker, marker.get("prev")):
        if commit:
            referenced |= {f for f, _ in commit["files"].values()}
            referenced |= {f for f, _ in commit.get("deltas") or []}
    assert set(os.listdir(heap_dir)) == referenced


def test_heavy_changes_rewrite_key_groups_whole(tmp_path) -> None:
    b = make(tmp_path)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    for k in range(200):
        b.set_current_key(k)
        v.update(k)
    b.commit_local(1)
    for epoch in (2, 3):
        for k in range(200):  # every key, every epoch: deltas would outgrow the groups
            b.set_current_key(k)
            v.update(k + epoch)
        b.commit_local(epoch)
        if epoch == 2:
            assert b._marker["deltas"] and b._marker["chain"]
    assert b._marker["deltas"] == [] and b._marker["chain"] == {}
    assert all(f.endswith(f"-{b._marker['token']}.pkl") for f, _ in b._marker["files"].values())


def test_revert_same_epoch_drops_uncommitted(tmp_path) -> None:
    b = make(tmp_path)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    b.set_current_key(1)
    v.update(1)
    b.commit_local(1)
    v.update(2)
    assert b.revert_to(1)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    b.set_current_key(1)
    assert v.value() == 1


def test_snapshot_is_consistent_while_updates_continue(tmp_path) -> None:
    b = make(tmp_path)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    li = b.get_partitioned_state(ListStateDescriptor("l", Types.LONG()))
    m = b.get_partitioned_state(MapStateDescriptor("m", Types.LONG(), Types.LONG()))
    for k in range(100):
        b.set_current_key(k)
        v.update(k)
        li.add(k)
        m.put(k, k)
    upload = b.snapshot(1, MemCheckpointStreamFactory())
    for k in range(100):  # after the synchronous part, before the upload
        b.set_current_key(k)
        v.update(-k)
        li.add(-k)
        m.put(k, -k)
        m.put(-1, 0)
    b.set_current_key(1000)
    v.update(1)
    handle = upload()
    r = make(tmp_path, sub="r")
    r.restore([handle])
    rv = r.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    rl = r.get_partitioned_state(ListStateDescriptor("l", Types.LONG()))
    rm = r.get_partitioned_state(MapStateDescriptor("m", Types.LONG(), Types.LONG()))
    assert sorted(r.get_keys("v")) == list(range(100))
    for k in range(100):
        r.set_current_key(k)
        assert rv.value() == k and list(rl.get()) == [k] and dict(rm.items()) == {k: k}
    # live state kept every update
    b.set_current_key(7)
    assert v.value() == -7 and list(li.get()) == [7, -7] and dict(m.items()) == {7: -7, -1: 0}


@pytest.mark.parametrize("old_p,new_p", [(1, 4), (4, 2), (3, 7), (15, 77), (77, 15)])
@pytest.mark.parametrize("kind", [SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT])
def test_rescale_restores_each_key_exactly_once(tmp_path, old_p, new_p, kind) -> None:
    from sparkpoint.state.key_groups import (
        assign_to_key_group,
        compute_operator_index_for_key_group,
    )

    factory = MemCheckpointStreamFactory()
    d = MapStateDescriptor("m", Types.STRING(), Types.LONG())
    keys = [f"key-{i}" for i in range(300)]
    handles = []
    for i in range(old_p):
        b = make(tmp_path, i, old_p, f"old{i}")
        m = b.get_partitioned_state(d)
        for k in keys:
            if (
                compute_operator_index_for_key_group(MAX_P, old_p, assign_to_key_group(k, MAX_P))
                == i
            ):
                b.set_current_key(k)
                m.put(k, len(k))
        h = b.snapshot(1, factory, kind)()
        if h is not None:
            handles.append(h)
    seen = []
    for i in range(new_p):
        r = make(tmp_path, i, new_p, f"new{i}")
        r.restore(handles)
        m = r.get_partitioned_state(d)
        for k in r.get_keys("m"):
            r.set_current_key(k)
            assert dict(m.items()) == {k: len(k)}
            seen.append(k)
    assert sorted(seen) == sorted(keys)


def test_file_handles_and_ranged_reads(tmp_path) -> None:
    chk = os.path.join(str(tmp_path), "chk")
    os.makedirs(chk)
    factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 1024)
    b = make(tmp_path)
    v = b.get_partitioned_state(ValueStateDescriptor("v", Types.STRING()))
    for k in range(2000):
        b.set_current_key(k)
        v.update("x" * 50)
    h = b.snapshot(1, factory, SnapshotType.SAVEPOINT)()
    assert isinstance(h, KeyGroupsSavepointStateHandle)
    assert isinstance(h.delegate, FileStateHandle)
    r = make(tmp_path, 1, 4, "r")
    r.restore([h])
    assert len(list(r.get_keys("v"))) == sum(
        1
        for k in range(2000)
        if r.key_group_range.contains(
            __import__("sparkpoint.state.key_groups", fromlist=["x"]).assign_to_key_group(k, 128)
        )
    )
    # small state stays inline
    small = make(tmp_path, sub="s")
    small.get_partitioned_state(ValueStateDescriptor("v", Types.INT()))
    small.set_current_key(1)
    small.get_partitioned_state(ValueStateDescriptor("v", Types.INT())).update(1)
    hs = small.snapshot(1, factory)()
    assert hs is not None and hs.delegate.as_bytes_if_in_memory() is not None


def test_max_parallelism_mismatch_refused(tmp_path) -> None:
    b = make(tmp_path)
    b.set_current_key(1)
    b.get_partitioned_state(ValueStateDescriptor("v", Types.INT())).update(1)
    h = b.snapshot(1, MemCheckpointStreamFactory())()
    r = make(tmp_path, sub="r", max_p=256)
    with pytest.raises(RestoreError, match="Max parallelism mismatch between checkpoint/savepoint"):
        r.restore([h])


def test_empty_backend_snapshot_is_none(tmp_path) -> None:
    b = make(tmp_path)
    assert b.snapshot(1, MemCheckpointStreamFactory())() is None
    b.get_partitioned_state(ValueStateDescriptor("v", Types.INT()))
    assert b.snapshot(2, MemCheckpointStreamFactory())() is None


def test_serializer_migration_on_restore(tmp_path) -> None:
    b = make(tmp_path)
    b.set_current_key(1)
    b.get_partitioned_state(ValueStateDescriptor("v", Types.INT())).update(41)
    h = b.snapshot(1, MemCheckpointStreamFactory(), SnapshotType.SAVEPOINT)()
    r = make(tmp_path, sub="r")
    r.restore([h])
    r.set_current_key(1)
    assert r.get_partitioned_state(ValueStateDescriptor("v", Types.LONG())).value() == 41
    r2 = make(tmp_path, sub="r2")
    r2.restore([h])
    with pytest.raises(RestoreError, match="restored as VALUE"):
        r2.get_partitioned_state(ListStateDescriptor("v", Types.INT()))


def test_typed_keys_and_dispose(tmp_path) -> None:
    b = make(tmp_path, key_ser=Types.LONG().get_serializer())
    b.set_current_key(2**40)
    b.get_partitioned_state(ValueStateDescriptor("v", Types.INT())).update(1)
    h = b.snapshot(1, MemCheckpointStreamFactory(), SnapshotType.SAVEPOINT)()
    r = make(tmp_path, sub="r", key_ser=Types.LONG().get_serializer())
    r.restore([h])
    assert list(r.get_keys("v")) == [2**40]
    b.commit_local(1)
    b.dispose()
    assert not os.path.exists(os.path.join(str(tmp_path), "a", "heap"))


def test_restore_clears_local_epoch_until_commit(tmp_path) -> None:
    b = make(tmp_path)
    b.set_current_key(1)
    b.get_partitioned_state(ValueStateDescriptor("v", Types.INT())).update(1)
    b.commit_local(3)
    h = b.snapshot(1, MemCheckpointStreamFactory())()
    b.restore([h])
    assert b.local_epoch() is None and not b.revert_to(3)
    b.commit_local(4)
    assert b.local_epoch() == 4
    b.close()
    again = make(tmp_path)
    again.set_current_key(1)
    assert again.local_epoch() == 4
    assert again.get_partitioned_state(ValueStateDescriptor("v", Types.INT())).value() == 1


def test_ttl_incremental_cleanup_on_access(tmp_path) -> None:
    clock = ManualClock(1_000)
    b = make(tmp_path, clock=clock)
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(StateTtlConfig.new_builder(10).cleanup_incrementally(100, False).build())
    v = b.get_partitioned_state(d)
    for k in range(50):
        b.set_current_key(k)
        v.update(k)
    clock.ms += 20
    b.set_current_key(1000)
    v.value()  # first access starts a pass, the next one checks 100 keys
    v.value()
    assert list(b.get_keys("v")) == []
    off = ValueStateDescriptor("w", Types.INT())
    off.enable_time_to_live(StateTtlConfig.new_builder(10).disable_cleanup_in_background().build())
    w = b.get_partitioned_state(off)
    for k in range(5):
        b.set_current_key(k)
        w.update(k)
    clock.ms += 20
    w.value()
    assert len(list(b.get_keys("w"))) == 4  # only the key read was dropped


def test_same_worker_adopts_cached_tables_without_reload(tmp_path) -> None:
    d = ValueStateDescriptor("v", Types.LONG())
    b = make(tmp_path)
    b.set_current_key(1)
    b.get_partitioned_state(d).update(1)
    b.commit_local(1)
    table = b._heap_tables()["v"]
    b.close()
    again = make(tmp_path)
    assert again._heap_tables()["v"] is table  # no reload from disk
    again.close()
    clear_heap_cache()
    fresh = make(tmp_path)
    assert fresh._heap_tables()["v"] is not table
    fresh.set_current_key(1)
    assert fresh.get_partitioned_state(d).value() == 1


def test_cached_tables_of_removed_state_are_freed(tmp_path) -> None:
    """A job's local state removed at its end (by any worker) frees this worker's cached
    tables of it at the next close, so finished jobs do not pile up in reused workers."""
    d = ValueStateDescriptor("v", Types.LONG())

    def commit_one(sub: str) -> str:
        b = make(tmp_path, sub=sub)
        b.set_current_key(1)
        b.get_partitioned_state(d).update(1)
        b.commit_local(1)
        b.close()
        return b._dir

    ended = commit_one("ended")
    assert cached_state_dirs() == [ended]
    shutil.rmtree(os.path.join(str(tmp_path), "ended"))
    running = commit_one("running")
    assert cached_state_dirs() == [running]


def test_uncommitted_tables_are_not_cached(tmp_path) -> None:
    d = ValueStateDescriptor("v", Types.LONG())
    b = make(tmp_path)
    b.set_current_key(1)
    v = b.get_partitioned_state(d)
    v.update(1)
    b.commit_local(1)
    v.update(2)  # a failed attempt's partial epoch
    b.close()
    retry = make(tmp_path)
    retry.set_current_key(1)
    assert retry.get_partitioned_state(d).value() == 1


entries = st.dictionaries(
    st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=8)),
    st.tuples(
        st.integers(-(2**63), 2**63 - 1),
        st.lists(st.text(max_size=4), max_size=3),
        st.dictionaries(st.integers(0, 9), st.none() | st.floats(allow_nan=False), max_size=3),
    ),
    max_size=40,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=entries,
    new_p=st.integers(1, 9),
    kind=st.sampled_from([SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT]),
)
def test_round_trips_are_exact(tmp_path_factory, data, new_p, kind) -> None:
    tmp = tmp_path_factory.mktemp("rt")
    b = make(tmp, sub="src")
    dv = ValueStateDescriptor("v", Types.LONG())
    dl = ListStateDescriptor("l", Types.STRING())
    dm = MapStateDescriptor("m", Types.INT(), Types.DOUBLE())
    for k, (v, li, m) in data.items():
        b.set_current_key(k)
        b.get_partitioned_state(dv).update(v)
        b.get_partitioned_state(dl).update(li)
        b.get_partitioned_state(dm).put_all(m)
    h = b.snapshot(1, MemCheckpointStreamFactory(), kind)()
    got = {}
    for i in range(new_p):
        r = make(tmp, i, new_p, f"dst{i}")
        r.restore([] if h is None else [h])
        for k in r.get_keys("v"):
            r.set_current_key(k)
            got[k] = (
                r.get_partitioned_state(dv).value(),
                list(r.get_partitioned_state(dl).get()),
                dict(r.get_partitioned_state(dm).items()),
            )
    assert got == data
    clear_heap_cache()


def test_snapshot_upload_in_thread_while_updating(tmp_path) -> None:
    import threading

    b = make(tmp_path)
    li = b.get_partitioned_state(ListStateDescriptor("l", Types.LONG()))
    m = b.get_partitioned_state(MapStateDescriptor("m", Types.LONG(), Types.LONG()))
    for k in range(2000):
        b.set_current_key(k)
        li.add(k)
        m.put(k, k)
    for kind in (SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT):
        upload = b.snapshot(1, MemCheckpointStreamFactory(50 * 1024 * 1024), kind)
        result = []
        t = threading.Thread(target=lambda u=upload, out=result: out.append(u()))
        t.start()
        for k in range(2000):
            b.set_current_key(k)
            li.add(-1)
            m.put(-1, -1)
            m.remove(k)
        t.join()
        r = make(tmp_path, sub=f"r-{kind}")
        r.restore(result)
        rl = r.get_partitioned_state(ListStateDescriptor("l", Types.LONG()))
        rm = r.get_partitioned_state(MapStateDescriptor("m", Types.LONG(), Types.LONG()))
        for k in range(0, 2000, 97):
            r.set_current_key(k)
            expected_list = [k] if kind == SnapshotType.CHECKPOINT else [k, -1]
            assert list(rl.get()) == expected_list
            assert dict(rm.items()) == ({k: k} if kind == SnapshotType.CHECKPOINT else {-1: -1})


def test_lazy_decoding_after_restore_and_reopen(tmp_path) -> None:
    d = ValueStateDescriptor("v", Types.LONG())
    b = make(tmp_path)
    v = b.get_partitioned_state(d)
    for k in range(300):
        b.set_current_key(k)
        v.update(k)
    h = b.snapshot(1, MemCheckpointStreamFactory())()
    r = make(tmp_path, sub="r")
    r.restore([h])
    assert len(r._pending.blocks) > 100  # nothing decoded yet
    r.set_current_key(5)
    rv = r.get_partitioned_state(d)
    assert rv.value() == 5
    assert len(r._pending.blocks) == len([o for o in h.group_range_offsets.offsets if o >= 0]) - 1
    r.commit_local(1)  # untouched groups are written back undecoded
    assert len(r._pending.blocks) > 100
    r.close()
    clear_heap_cache()
    again = make(tmp_path, sub="r")
    assert sorted(again.get_keys("v")) == list(range(300))
    again.set_current_key(299)
    assert again.get_partitioned_state(d).value() == 299


def test_corrupt_blocks_raise_clear_errors(tmp_path) -> None:
    from sparkpoint.errors import StateLostError

    d = ValueStateDescriptor("v", Types.LONG())
    b = make(tmp_path)
    b.set_current_key(1)
    b.get_partitioned_state(d).update(1)
    b.commit_local(1)
    b.close()
    clear_heap_cache()
    heap_dir = os.path.join(str(tmp_path), "a", "heap")
    for name in os.listdir(heap_dir):
        if name.endswith(".pkl"):
            with open(os.path.join(heap_dir, name), "wb") as f:
                f.write(b"garbage")
    again = make(tmp_path)
    again.set_current_key(1)
    with pytest.raises(StateLostError, match="local heap state of key group 44 is corrupt"):
        again.get_partitioned_state(d).value()


def _worker_step(
    local_dir: str, epoch: int, writes: dict[int, int | None], clear_groups: bool
) -> tuple[str, dict[int, int]]:
    """One task in a Python worker of its own (a forked pool process keeps its cache):
    open the subtask's state, check it is at ``epoch - 1``, apply ``writes`` (None deletes),
    optionally write every key (rewrites key groups whole), commit ``epoch``; returns how
    the state was opened and every value it holds after the commit."""
    d = ValueStateDescriptor("v", Types.LONG())
    b = make(local_dir)
    assert b.local_epoch() == (epoch - 1 if epoch > 1 else None)
    state = b.get_partitioned_state(d)
    if clear_groups:  # every key written: key groups with deltas already are rewritten whole
        for key in list(b.get_keys("v")):
            b.set_current_key(key)
            state.update(state.value())
    for key, value in writes.items():
        b.set_current_key(key)
        state.update(value)
    b.commit_local(epoch)
    opened = b.opened_from
    values = {}
    for key in b.get_keys("v"):
        b.set_current_key(key)
        values[key] = state.value()
    b.close()
    return opened, values


def test_a_worker_catches_up_with_commits_of_another_worker(tmp_path) -> None:
    """Two Python workers of one executor take turns with a subtask: each keeps its tables
    cached, and a worker whose cache is some commits behind applies only what was committed
    since (deltas, and key groups rewritten whole), ending at exactly the committed state."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    local = str(tmp_path / "sub")
    expected: dict[int, int] = {}
    with ctx.Pool(1) as a, ctx.Pool(1) as b:
        plan = [  # (worker, writes, rewrite every key group)
            (a, {k: k for k in range(300)}, False),
            (b, {k: -k for k in range(0, 300, 7)}, False),  # deltas
            (b, {1: None, 2: None, 1000: 5}, False),  # deletes, a new key
            (a, {k: 2 * k for k in range(0, 300, 11)}, False),  # a catches up over 2
            (b, {}, True),  # whole rewrites
            (b, {3: 33}, False),
            (a, {4: 44, 2: 22}, False),  # a catches up over a rewrite
        ]
        opened = []
        for epoch, (worker, writes, rewrite) in enumerate(plan, start=1):
            how, values = worker.apply(_worker_step, (local, epoch, writes, rewrite))
            for key, value in writes.items():
                if value is None:
                    expected.pop(key, None)
                else:
                    expected[key] = value
            assert values == expected, f"epoch {epoch}"
            opened.append(how)
    assert opened == [
        "empty",
        "files",
        "cache",
        "cache caught up",
        "cache caught up",
        "cache",
        "cache caught up",
    ]
