"""The state processor's core without Spark: snapshots of the real backends read as typed
columns (every snapshot kind and state kind), and rows written as key-group streams that the
real backends restore at another parallelism; clear errors for bad rows."""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sparkpoint.checkpoint.handles import KeyGroupsStateHandle
from sparkpoint.state.backend import SnapshotType
from sparkpoint.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.heap import clear_heap_cache
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.state.ttl import StateTtlConfig
from sparkpoint.state.typeinfo import Types
from sparkpoint.state_processor.snapshot_reading import (
    ReadSplit,
    key_groups_metas,
    merge_metas,
    plan_splits,
    read_split,
    registry_metas,
)
from sparkpoint.state_processor.state_columns import KeyColumn, StateColumn, StateDecoder
from sparkpoint.state_processor.state_info import StateInfo
from sparkpoint.state_processor.state_writing import (
    RowEncoder,
    SavepointTarget,
    StateInput,
    SubtaskWriter,
)
from sparkpoint.state_processor.type_mapping import PICKLED_METADATA
from sparkpoint.types import Row
from tests.state.contract.harness import MAX_P, TIMERS, Harness, fill, owner

V = ValueStateDescriptor("v", Types.LONG())
L = ListStateDescriptor("l", Types.INT())
M = MapStateDescriptor("m", Types.STRING(), Types.DOUBLE())
R = ReducingStateDescriptor("r", lambda a, b: a + b, Types.LONG())
U = ValueStateDescriptor("u")  # untyped: pickled
P = ValueStateDescriptor(
    "p", Types.ROW_NAMED(["name", "at"], [Types.STRING(), Types.SQL_TIMESTAMP()])
)
T = ValueStateDescriptor("t", Types.STRING())
T.enable_time_to_live(StateTtlConfig.new_builder(10**9).build())
STATES = {"v": V, "l": L, "m": M, "r": R, "u": U, "p": P, "t": T}
KEYS = list(range(200))
BASE = dt.datetime(2024, 5, 1, 12, 0, 0)


def _writer(key: int, states: dict[str, Any]) -> None:
    states["v"].update(key * 10)
    if key % 3:
        states["l"].add_all([key, key + 1])
    states["m"].put_all({"a": key / 2, "none": None})
    states["r"].add(key)
    states["r"].add(1)
    states["u"].update(("tuple", key))
    states["p"].update(Row(name=f"n{key}", at=BASE + dt.timedelta(seconds=key)))
    states["t"].update(f"t{key}")


def _expected(key: int) -> dict[str, Any]:
    return {
        "v": key * 10,
        "l": [key, key + 1] if key % 3 else None,
        "m": {"a": key / 2, "none": None},
        "r": key + 1,
        "u": ("tuple", key),
        "p": {"name": f"n{key}", "at": BASE + dt.timedelta(seconds=key)},
        "t": f"t{key}",
    }


def _populate(harness: Harness, parallelism: int, snapshot_type: str) -> list[Any]:
    handles = []
    for i in range(parallelism):
        b = harness.create(i, parallelism)
        fill(b, KEYS, STATES, _writer)
        b.commit_local(1)
        handles.append(harness.snapshot(b, 1, snapshot_type))
        b.close()
    return [h for h in handles if h is not None]


def _metas(handles: list[Any]) -> dict[str, Any]:
    full = [h for h in handles if isinstance(h, KeyGroupsStateHandle)]
    found = key_groups_metas(full)
    from sparkpoint.state.table import RegisteredStateMeta

    for h in handles:
        if not isinstance(h, KeyGroupsStateHandle):
            found += [RegisteredStateMeta.from_json(m) for m in registry_metas(h)]
    return merge_metas(found, "op-1")


def _read_all(splits: list[ReadSplit], decoder: StateDecoder) -> pa.Table:
    batches = [b for s in splits for b in decoder.batches(read_split(s))]
    return pa.Table.from_batches(batches, schema=decoder.schema)


@pytest.fixture(params=["heap", "rocksdb-full", "rocksdb-incremental"])
def harness(request: Any, tmp_path: Any) -> Any:
    h = Harness(request.param, "filesystem", str(tmp_path))
    yield h
    h.close_all()
    clear_heap_cache()


@pytest.mark.parametrize("snapshot_type", [SnapshotType.SAVEPOINT, SnapshotType.CHECKPOINT])
def test_snapshots_of_every_backend_read_as_typed_columns(
    harness: Harness, snapshot_type: str
) -> None:
    handles = _populate(harness, 3, snapshot_type)
    metas = _metas(handles)
    assert set(metas) == set(STATES)
    assert StateInfo.from_meta(metas["m"]) == StateInfo.from_descriptor(M)
    hint = Types.TUPLE([Types.STRING(), Types.LONG()])
    decoder = StateDecoder(
        KeyColumn.of("PICKLED_BYTE_ARRAY", Types.LONG()),
        [StateColumn.of(metas[n], hint if n == "u" else None) for n in STATES],
    )
    table = _read_all(plan_splits(handles, 7), decoder)
    rows = table.to_pylist()
    assert sorted(r["key"] for r in rows) == KEYS  # each key exactly once
    got = {r.pop("key"): {**r, "m": dict(r["m"]), "u": tuple(r["u"].values())} for r in rows}
    assert got == {k: _expected(k) for k in KEYS}
    assert str(table.schema.field("p").type) == "struct<name: string, at: timestamp[us]>"


def test_splits_cover_every_key_group_once_and_balance_bytes(tmp_path: Any) -> None:
    h = Harness("heap", "filesystem", str(tmp_path))
    handles = _populate(h, 2, SnapshotType.SAVEPOINT)
    splits = plan_splits(handles, 8)
    assert len(splits) >= 8
    covered = [kg for s in splits for kg in s.key_groups]
    assert sorted(covered) == list(range(MAX_P))
    metas = _metas(handles)
    decoder = StateDecoder(
        KeyColumn.of("PICKLED_BYTE_ARRAY", Types.LONG()), [StateColumn.of(metas["v"])]
    )
    sizes = [_read_all([s], decoder).num_rows for s in splits]
    assert sum(sizes) == len(KEYS)
    assert max(sizes) <= 3 * (len(KEYS) // len(splits) + 1)
    h.close_all()


def test_long_form_one_row_per_entry(tmp_path: Any) -> None:
    h = Harness("rocksdb-full", "filesystem", str(tmp_path))
    handles = _populate(h, 2, SnapshotType.SAVEPOINT)
    metas = _metas(handles)
    key = KeyColumn.of("PICKLED_BYTE_ARRAY", Types.LONG())
    table = _read_all(
        plan_splits(handles, 2), StateDecoder(key, [StateColumn.of(metas["m"])], form="long")
    )
    assert table.column_names == ["key", "state_name", "user_key", "value"]
    got = sorted(
        (r["key"], r["user_key"], r["value"]) for r in table.to_pylist() if r["user_key"] == "a"
    )
    assert got == [(k, "a", k / 2) for k in KEYS]
    assert table.num_rows == 2 * len(KEYS)
    with pytest.raises(ValueError, match="different value types"):
        StateDecoder(key, [StateColumn.of(metas["v"]), StateColumn.of(metas["t"])], form="long")
    h.close_all()


def test_untyped_state_reads_as_marked_pickle_bytes(tmp_path: Any) -> None:
    h = Harness("heap", "filesystem", str(tmp_path))
    handles = _populate(h, 1, SnapshotType.SAVEPOINT)
    metas = _metas(handles)
    decoder = StateDecoder(KeyColumn.of("PICKLED_BYTE_ARRAY", None), [StateColumn.of(metas["u"])])
    table = _read_all(plan_splits(handles, 1), decoder)
    for name in ("key", "u"):
        assert table.schema.field(name).type == pa.binary()
        assert table.schema.field(name).metadata == {PICKLED_METADATA.encode(): b"true"}
    import pickle

    assert sorted(pickle.loads(r["key"]) for r in table.to_pylist()) == KEYS
    assert {pickle.loads(r["u"]) for r in table.to_pylist()} == {("tuple", k) for k in KEYS}
    with pytest.raises(ValueError, match="typed"):
        StateColumn.of(metas["v"], Types.STRING())
    h.close_all()


# -- writing ------------------------------------------------------------------------------


def _input(desc: Any, column_type: Any = None, raw: bool = False) -> StateInput:
    info = StateInfo.from_descriptor(desc)
    cfg = None if column_type is None else column_type.get_serializer().snapshot_config()
    return StateInput(info.meta().to_json(), raw, cfg)


def _write(
    table: pa.Table,
    inputs: list[StateInput],
    parallelism: int,
    path: str,
    key_raw: bool = False,
    key_type: Any = None,
) -> list[Any]:
    """What the two Spark steps do, in one process: encode, route by subtask, sort, write."""
    os.makedirs(path, exist_ok=True)
    cfg = None if key_type is None else key_type.get_serializer().snapshot_config()
    encoder = RowEncoder("op-1", inputs, key_raw, cfg, MAX_P, parallelism, 5_000)
    encoded = pa.Table.from_batches(
        list(encoder.encode(iter(table.to_batches(50)))), encoder.schema
    )
    writer = SubtaskWriter("op-1", inputs, MAX_P, parallelism, SavepointTarget(path, 64, 4096))
    handles = []
    for sub in range(parallelism):
        part = encoded.filter(pc.equal(encoded["sub"], sub)).sort_by("kg")
        handle = writer.write(sub, iter(part.to_batches(17)))
        if handle is not None:
            assert handle.key_group_range == compute_key_group_range_for_operator_index(
                MAX_P, parallelism, sub
            )
            handles.append(handle)
    return handles


ROWS = pa.table(
    {
        "key": pa.array(range(500), pa.int64()),
        "v": pa.array([k * 3 if k % 7 else None for k in range(500)], pa.int64()),
        "l": pa.array([[k, -k] if k % 2 else [] for k in range(500)], pa.list_(pa.int32())),
        "m": pa.array(
            [[("x", k / 4), ("y", None)] for k in range(500)], pa.map_(pa.string(), pa.float64())
        ),
        "u": pa.array(
            [{"f0": "u", "f1": k} for k in range(500)],
            pa.struct([("f0", pa.string()), ("f1", pa.int64())]),
        ),
        "p": pa.array(
            [{"name": f"n{k}", "at": BASE} for k in range(500)],
            pa.struct([("name", pa.string()), ("at", pa.timestamp("us"))]),
        ),
    }
)


@pytest.mark.parametrize("backend", ["heap", "rocksdb-full"])
def test_written_rows_restore_in_the_backends_at_another_parallelism(
    backend: str, tmp_path: Any
) -> None:
    inputs = [_input(V), _input(L), _input(M), _input(U), _input(P, P.type_info)]
    handles = _write(ROWS.select(["key", "v", "l", "m", "u", "p"]), inputs, 3, str(tmp_path / "sp"))
    h = Harness(backend, "filesystem", str(tmp_path))
    seen = {}
    for i in range(2):
        b = h.create(i, 2)
        b.restore(handles)
        for key in range(500):
            if owner(key, 2) != i:
                continue
            b.set_current_key(key)
            seen[key] = (
                b.get_partitioned_state(V).value(),
                list(b.get_partitioned_state(L).get()),
                dict(b.get_partitioned_state(M).items()),
                b.get_partitioned_state(U).value(),
                b.get_partitioned_state(P).value(),
            )
        b.close()
    h.close_all()
    clear_heap_cache()
    assert seen == {
        k: (
            k * 3 if k % 7 else None,
            [k, -k] if k % 2 else [],
            {"x": k / 4, "y": None},
            ("u", k),
            Row(name=f"n{k}", at=BASE),
        )
        for k in range(500)
    }


def test_raw_pickled_columns_are_written_byte_for_byte(tmp_path: Any) -> None:
    h = Harness("heap", "filesystem", str(tmp_path))
    old = _populate(h, 2, SnapshotType.SAVEPOINT)
    metas = _metas(old)
    decoder = StateDecoder(
        KeyColumn.of("PICKLED_BYTE_ARRAY", None),
        [StateColumn.of(metas["u"]), StateColumn.of(metas["v"])],
    )
    table = _read_all(plan_splits(old, 3), decoder)
    new = _write(table, [_input(U, raw=True), _input(V)], 5, str(tmp_path / "sp"), key_raw=True)

    def entries(handles: list[Any]) -> set[tuple[str, bytes, bytes]]:
        out = set()
        for s in plan_splits(handles, 1):
            for _kg, states in read_split(s):
                for name, (_, (keys, _, vals)) in states.items():
                    if name in ("u", "v"):
                        out |= {
                            (name, bytes(k), bytes(v))
                            for k, v in zip(keys.to_pylist(), vals.to_pylist())
                        }
        return out

    assert entries(new) == entries(old)
    assert len(entries(new)) == 2 * len(KEYS)
    h.close_all()


def test_ttl_state_is_written_with_the_write_time(tmp_path: Any) -> None:
    rows = pa.table({"key": pa.array([1, 2], pa.int64()), "t": pa.array(["a", "b"])})
    handles = _write(rows, [_input(T)], 1, str(tmp_path / "sp"))
    h = Harness("heap", "filesystem", str(tmp_path))
    h.clock.ms = 5_000 + 10  # written at 5_000 (see _write), TTL 10**9 ms
    b = h.create(0, 1)
    b.restore(handles)
    b.set_current_key(2)
    assert b.get_partitioned_state(T).value() == "b"
    ((_, entries),) = [g for s in plan_splits(handles, 1) for g in read_split(s)][:1]
    meta, (_, _, vals) = entries["t"]
    assert {meta.ttl_timestamp_of(v) for v in vals.to_pylist()} == {5_000}
    h.close_all()
    clear_heap_cache()


@pytest.mark.parametrize(
    ("table", "inputs", "message"),
    [
        (
            pa.table({"key": pa.array([1, 1], pa.int64()), "v": pa.array([1, 2], pa.int64())}),
            [V],
            "key 1 appears in more than one row",
        ),
        (
            pa.table({"key": pa.array([1, None], pa.int64()), "v": pa.array([1, 2], pa.int64())}),
            [V],
            "1 null keys",
        ),
        (
            pa.table(
                {"key": pa.array([5], pa.int64()), "l": pa.array([[1, None]], pa.list_(pa.int32()))}
            ),
            [L],
            "list of key 5 holds null elements",
        ),
        (
            pa.table({"key": pa.array(["k"]), "i": pa.array([2**40], pa.int64())}),
            [ValueStateDescriptor("i", Types.INT())],
            "the value 1099511627776 of key 'k' cannot",
        ),
    ],
    ids=["duplicate-key", "null-key", "null-list-element", "overflow"],
)
def test_bad_rows_are_refused_naming_key_and_state(
    table: pa.Table, inputs: list[Any], message: str, tmp_path: Any
) -> None:
    with pytest.raises(ValueError, match=message):
        _write(table, [_input(d) for d in inputs], 2, str(tmp_path / "sp"))


def test_bad_type_hints_are_refused() -> None:
    meta = StateInfo.from_descriptor(L).meta()
    with pytest.raises(ValueError, match=r"LIST state: its type hint must be Types\.LIST"):
        StateColumn.of(meta, Types.INT())
    assert StateColumn.of(meta, Types.LIST(Types.INT())).type_info == Types.LIST(Types.INT())
    assert KeyColumn.of("PICKLED_BYTE_ARRAY", Types.BIG_DEC()).type_info == Types.BIG_DEC()


def test_timers_in_time_order_read_as_the_canonical_rows(tmp_path: Any) -> None:
    """RocksDB keeps a timers state in time order (``RocksDBTimerTable``); reading its
    incremental checkpoint gives the same canonical rows as a heap savepoint of it."""
    timers = MapStateDescriptor(TIMERS, Types.PICKLED_BYTE_ARRAY(), Types.BOOLEAN())

    def register(key: int, states: dict[str, Any]) -> None:
        states["t"].put((0, key * 7 - 50), True)
        states["t"].put((1, 3), True)

    rows = {}
    for kind in ("heap", "rocksdb-incremental"):
        harness = Harness(kind, "filesystem", str(tmp_path / kind))
        try:
            handles = []
            for i in range(2):
                b = harness.create(i, 2)
                fill(b, KEYS, {"t": timers}, register)
                b.commit_local(1)
                handles.append(harness.snapshot(b, 1, SnapshotType.CHECKPOINT))
            found = set()
            for split in plan_splits([h for h in handles if h is not None], 3):
                for _kg, states in read_split(split):
                    _meta, (keys, user_keys, values) = states[TIMERS]
                    found |= set(zip(keys, user_keys, values))
            rows[kind] = found
        finally:
            harness.close_all()
            clear_heap_cache()
    assert len(rows["heap"]) == 2 * len(KEYS)
    assert rows["rocksdb-incremental"] == rows["heap"]
