"""Heap checkpoints taken right after a local commit copy the commit's files (``pickle-chain``
blocks: each key group's whole-group block plus its deltas) instead of encoding the state:
restores (any parallelism, either backend), the state processor and later commits must see
exactly the committed state."""

from __future__ import annotations

import dataclasses
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common.typeinfo import Types
from sparkpoint.errors import CorruptStateError, RestoreError
from sparkpoint.fs import get_filesystem
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.state.savepoint_format import read_keyed_state
from sparkpoint.state.snapshot_format import read_header
from sparkpoint.state.ttl import StateTtlConfig

MAX_P = 128
DV = ValueStateDescriptor("v", Types.LONG())
DL = ListStateDescriptor("l", Types.STRING())
DM = MapStateDescriptor("m", Types.INT(), Types.LONG())


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_heap_cache()
    yield
    clear_heap_cache()


def params(tmp, sub, index=0, parallelism=1):
    rng = compute_key_group_range_for_operator_index(MAX_P, parallelism, index)
    return KeyedStateBackendParameters(
        "job", "op", index, parallelism, MAX_P, rng, os.path.join(str(tmp), sub), SYSTEM_CLOCK, None
    )


def heap(tmp, sub, index=0, parallelism=1):
    return HeapKeyedStateBackend(params(tmp, sub, index, parallelism))


def encoding(handle) -> str:
    with handle.delegate.open_input_stream() as stream:
        return read_header(stream).block_encoding


def apply(b, model, ops) -> None:
    """Apply ``(key, value, list, map)`` writes (None: clear the key) to the backend and the
    model ``{key: (value, list, map)}``."""
    v, li, m = (b.get_partitioned_state(d) for d in (DV, DL, DM))
    for key, value, elems, entries in ops:
        b.set_current_key(key)
        if value is None:
            v.clear()
            li.clear()
            m.clear()
            model.pop(key, None)
            continue
        v.update(value)
        li.add_all(elems)
        m.put_all(entries)
        old = model.get(key, (None, [], {}))
        model[key] = (value, old[1] + elems, {**old[2], **entries})


def read_all(b, keys=None) -> dict:
    out = {}
    for key in b.get_keys("v") if keys is None else keys:
        b.set_current_key(key)
        value = b.get_partitioned_state(DV).value()
        if value is None:
            continue
        out[key] = (
            value,
            list(b.get_partitioned_state(DL).get()),
            dict(b.get_partitioned_state(DM).items()),
        )
    return out


def committed_epochs(tmp, rounds, seed=0):
    """A backend after ``rounds`` committed epochs of random writes and deletes; returns it
    and the model of its state."""
    rnd = random.Random(seed)
    b = heap(tmp, "src")
    model: dict = {}
    for epoch in range(1, rounds + 1):
        ops = []
        for _ in range(rnd.randint(1, 300)):
            key = rnd.randint(0, 400)
            if rnd.random() < 0.1:
                ops.append((key, None, [], {}))
            else:
                ops.append((key, rnd.randint(-9, 9), [str(epoch)], {rnd.randint(0, 3): epoch}))
        apply(b, model, ops)
        b.commit_local(epoch)
    return b, model


def test_checkpoint_after_commit_copies_the_commit_files(tmp_path) -> None:
    b, model = committed_epochs(tmp_path, 6)
    assert b._marker["deltas"], "the commits wrote deltas"
    handle = b.snapshot(7, MemCheckpointStreamFactory(64 * 1024 * 1024))()
    assert encoding(handle) == "pickle-chain"
    for new_p in (1, 3, 7):
        got = {}
        for i in range(new_p):
            r = heap(tmp_path, f"r{new_p}-{i}", i, new_p)
            r.restore([handle])
            part = read_all(r)
            assert not set(part) & set(got)
            got.update(part)
        assert got == model


def test_savepoints_and_uncommitted_changes_take_the_encoding_path(tmp_path) -> None:
    b, _ = committed_epochs(tmp_path, 3)
    assert (
        encoding(b.snapshot(4, MemCheckpointStreamFactory(), SnapshotType.SAVEPOINT)()) == "arrow"
    )
    b.set_current_key(1)
    b.get_partitioned_state(DV).update(12345)
    handle = b.snapshot(4, MemCheckpointStreamFactory())()
    assert encoding(handle) == "pickle"
    r = heap(tmp_path, "r")
    r.restore([handle])
    assert read_all(r, [1])[1][0] == 12345


def test_ttl_cleanup_in_full_snapshot_takes_the_encoding_path(tmp_path) -> None:
    b = heap(tmp_path, "a")
    d = ValueStateDescriptor("t", Types.LONG())
    d.enable_time_to_live(StateTtlConfig.new_builder(100_000).cleanup_full_snapshot().build())
    b.set_current_key(1)
    b.get_partitioned_state(d).update(1)
    b.commit_local(1)
    assert encoding(b.snapshot(2, MemCheckpointStreamFactory())()) == "pickle"


def test_upload_survives_later_commits_deleting_the_files(tmp_path) -> None:
    b, model = committed_epochs(tmp_path, 4, seed=1)
    expected = dict(model)
    upload = b.snapshot(5, MemCheckpointStreamFactory(64 * 1024 * 1024))
    for epoch in range(5, 9):  # each commit deletes files two commits old
        apply(b, model, [(k, epoch, ["x"], {0: epoch}) for k in range(0, 400, 3)])
        b.commit_local(epoch)
    handle = upload()
    snapshots = os.path.join(str(tmp_path), "src", "heap-snapshots")
    assert os.listdir(snapshots) == []  # the upload removed its links
    r = heap(tmp_path, "r")
    r.restore([handle])
    assert read_all(r) == expected
    assert read_all(b) == model


def test_restored_chain_blocks_commit_and_checkpoint_again(tmp_path) -> None:
    b, model = committed_epochs(tmp_path, 5, seed=2)
    handle = b.snapshot(6, MemCheckpointStreamFactory(64 * 1024 * 1024))()
    r = heap(tmp_path, "r")
    r.restore([handle])
    r.commit_local(5)
    apply(r, model, [(k, 100, ["y"], {9: 9}) for k in range(0, 400, 7)])
    r.commit_local(6)
    r.close()
    clear_heap_cache()
    reopened = heap(tmp_path, "r")
    assert reopened.local_epoch() == 6
    second = reopened.snapshot(7, MemCheckpointStreamFactory(64 * 1024 * 1024))()
    assert encoding(second) == "pickle-chain"
    again = heap(tmp_path, "again")
    again.restore([second])
    assert read_all(again) == model


def test_rocksdb_and_the_state_processor_read_chain_checkpoints(tmp_path) -> None:
    b, model = committed_epochs(tmp_path, 4, seed=3)
    chk = os.path.join(str(tmp_path), "chk")
    os.makedirs(chk)
    factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 1024)
    handle = b.snapshot(5, factory)()
    assert encoding(handle) == "pickle-chain"
    rocks = RocksDBKeyedStateBackend(params(tmp_path, "rocks"))
    rocks.restore([handle])
    assert read_all(rocks) == model
    rocks.dispose()
    rows = read_keyed_state(handle).to_pylist()
    assert len({row["key"] for row in rows if row["state_name"] == "v"}) == len(model)
    assert len([r for r in rows if r["state_name"] == "m"]) == sum(
        len(m) for _, _, m in model.values()
    )


def test_corrupt_chain_block_is_a_restore_error(tmp_path) -> None:
    b, _ = committed_epochs(tmp_path, 3, seed=4)
    chk = os.path.join(str(tmp_path), "chk")
    os.makedirs(chk)
    handle = b.snapshot(4, FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 0))()
    path = handle.delegate.path
    data = bytearray(open(path, "rb").read())
    offset = next(o for o in handle.group_range_offsets.offsets if o >= 0)
    data[offset + 8 : offset + 40] = b"\x00" * 32
    with open(path, "wb") as f:
        f.write(bytes(data))
    r = RocksDBKeyedStateBackend(params(tmp_path, "rocks"))
    # The handle's digest catches the change before any block is decoded ...
    with pytest.raises(CorruptStateError, match=f"State file {path} is corrupt"):
        r.restore([handle])
    # ... and without one (a snapshot written before digests) the block decode does.
    undigested = dataclasses.replace(
        handle, delegate=dataclasses.replace(handle.delegate, digest=None)
    )
    with pytest.raises(RestoreError, match="pickle-chain"):
        r.restore([undigested])
    r.dispose()


ops_strategy = st.lists(
    st.lists(
        st.tuples(
            st.integers(0, 60),
            st.none() | st.integers(-5, 5),
            st.lists(st.text(max_size=2), max_size=2),
            st.dictionaries(st.integers(0, 3), st.integers(0, 9), max_size=2),
        ),
        min_size=1,
        max_size=40,
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(epochs=ops_strategy, new_p=st.integers(1, 5))
def test_chain_checkpoints_round_trip_exactly(tmp_path_factory, epochs, new_p) -> None:
    tmp = tmp_path_factory.mktemp("chain")
    b = heap(tmp, "src")
    model: dict = {}
    for n, ops in enumerate(epochs, start=1):
        apply(
            b,
            model,
            [(k, v, [] if v is None else li, {} if v is None else m) for k, v, li, m in ops],
        )
        b.commit_local(n)
    handle = b.snapshot(len(epochs) + 1, MemCheckpointStreamFactory(64 * 1024 * 1024))()
    got = {}
    for i in range(new_p):
        r = heap(tmp, f"dst{i}", i, new_p)
        r.restore([] if handle is None else [handle])
        got.update(read_all(r))
    assert got == model
    clear_heap_cache()
