"""The canonical savepoint format: written by heap, read as Arrow, restored, versioned."""

from __future__ import annotations

import io
import json
import os
import struct

import pyarrow as pa
import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.handles import KeyGroupsSavepointStateHandle
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common.typeinfo import Types
from sparkpoint.errors import RestoreError
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from sparkpoint.state.savepoint_format import (
    decode_savepoint_column,
    read_keyed_state,
    read_savepoint_state,
)
from sparkpoint.state.snapshot_format import MAGIC, SCHEMA, read_header
from sparkpoint.state.ttl import StateTtlConfig
from sparkpoint.testing import ManualClock

MAX_P = 128


def backend(tmp_path, index, p, sub, clock=SYSTEM_CLOCK):
    rng = compute_key_group_range_for_operator_index(MAX_P, p, index)
    return HeapKeyedStateBackend(
        KeyedStateBackendParameters(
            "job",
            "op",
            index,
            p,
            MAX_P,
            rng,
            os.path.join(str(tmp_path), sub),
            clock,
            Types.STRING().get_serializer(),
        )
    )


@pytest.fixture(autouse=True)
def _cache():
    yield
    clear_heap_cache()


def fill(b, keys):
    ttl = ValueStateDescriptor("t", Types.LONG())
    ttl.enable_time_to_live(StateTtlConfig.new_builder(10_000).build())
    for k in keys:
        b.set_current_key(k)
        b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG())).update(len(k))
        b.get_partitioned_state(ListStateDescriptor("l", Types.STRING())).add_all([k, k])
        b.get_partitioned_state(MapStateDescriptor("m", Types.STRING(), Types.INT())).put("a", 1)
        b.get_partitioned_state(ttl).update(5)


def test_savepoint_read_as_arrow_table_without_runtime(tmp_path) -> None:
    keys = [f"k{i}" for i in range(40)]
    access = FsCheckpointStorageAccess(str(tmp_path / "chk"), str(tmp_path / "sp"), "job")
    location = access.initialize_location_for_savepoint(1, None)
    subtasks = {}
    for i in range(2):
        b = backend(tmp_path, i, 2, f"b{i}", clock=ManualClock(777))
        fill(b, [k for k in keys if b.key_group_range.contains(assign_to_key_group(k, MAX_P))])
        h = b.snapshot(1, location, SnapshotType.SAVEPOINT)()
        assert isinstance(h, KeyGroupsSavepointStateHandle)
        subtasks[i] = OperatorSubtaskState(managed_keyed_state=(h,))
    done = write_metadata(
        location, CheckpointMetadata(1, (OperatorState("op", 2, MAX_P, subtasks),))
    )
    table = read_savepoint_state(done.external_pointer)
    assert table.num_rows == 4 * len(keys)
    values = table.filter(pa.compute.equal(table["state_name"], "v"))
    decoded = dict(
        zip(
            decode_savepoint_column(values["key"], "STRING"),
            (Types.LONG().get_serializer().deserialize(v) for v in values["value"].to_pylist()),
        )
    )
    assert decoded == {k: len(k) for k in keys}
    ttl_rows = table.filter(pa.compute.equal(table["state_name"], "t"))
    assert set(ttl_rows["ttl_timestamp"].to_pylist()) == {777}
    maps = table.filter(pa.compute.equal(table["state_kind"], "MAP"))
    assert set(decode_savepoint_column(maps["user_key"], "STRING")) == {"a"}
    assert set(table["subtask"].to_pylist()) == {0, 1}
    assert read_savepoint_state(done.external_pointer, operator_id="nope").num_rows == 0


def test_format_is_documented_bytes(tmp_path) -> None:
    b = backend(tmp_path, 0, 1, "a")
    fill(b, ["x"])
    h = b.snapshot(1, MemCheckpointStreamFactory(), SnapshotType.SAVEPOINT)()
    data = h.delegate.read_all()
    assert data[:4] == MAGIC and struct.unpack(">H", data[4:6])[0] == 1
    n = struct.unpack(">I", data[6:10])[0]
    header = json.loads(data[10 : 10 + n])
    assert header["max_parallelism"] == MAX_P and header["block_encoding"] == "arrow"
    assert [s["name"] for s in header["states"]] == ["v", "l", "m", "t"]
    kg = assign_to_key_group("x", MAX_P)
    off = h.group_range_offsets.get_key_group_offset(kg)
    got_kg, size = struct.unpack(">iI", data[off : off + 8])
    batch = pa.ipc.read_record_batch(pa.py_buffer(data[off + 8 : off + 8 + size]), SCHEMA)
    assert got_kg == kg and batch.num_rows == 4
    assert sum(1 for o in h.group_range_offsets.offsets if o >= 0) == 1
    assert read_header(io.BytesIO(data)).states[2].user_key_serializer is not None
    # heap checkpoints are readable as tables too
    hc = b.snapshot(2, MemCheckpointStreamFactory())()
    assert read_keyed_state(hc).num_rows == 4


def test_unknown_version_and_magic_refused(tmp_path) -> None:
    b = backend(tmp_path, 0, 1, "a")
    fill(b, ["x"])
    h = b.snapshot(1, MemCheckpointStreamFactory(), SnapshotType.SAVEPOINT)()
    data = h.delegate.read_all()
    with pytest.raises(RestoreError, match="Unsupported keyed state snapshot version 9"):
        read_header(io.BytesIO(data[:4] + struct.pack(">H", 9) + data[6:]))
    with pytest.raises(RestoreError, match="Not a sparkpoint keyed state snapshot"):
        read_header(io.BytesIO(b"XXXX" + data[4:]))
    with pytest.raises(RestoreError, match="Truncated"):
        read_header(io.BytesIO(data[:12]))
