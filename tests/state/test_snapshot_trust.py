"""Pickled state is code: a snapshot header cannot switch typed state to pickle (refused
always), and with ``sparkpoint.snapshot.allow-pickle`` false pickles are read as plain data
only. Every crafted payload would create a marker file when unpickled; it never appears.

Both real keyed backends restore real (crafted) key-group streams.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.handles import KeyGroupsSavepointStateHandle, KeyGroupsStateHandle
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common.typeinfo import Types
from sparkpoint.errors import UntrustedSnapshotError
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.pickling import set_allow_pickle
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.state.serializers import PickleSerializer
from sparkpoint.state.snapshot_format import (
    SnapshotHeader,
    arrow_block,
    write_key_groups_snapshot,
)
from sparkpoint.state.table import RegisteredStateMeta
from tests.fixtures.crafted_pickle import Plant

MAX_P = 16
TYPED = ValueStateDescriptor("v", Types.INT())
UNTYPED = ValueStateDescriptor("v", Types.PICKLED_BYTE_ARRAY())
BACKENDS = {"heap": HeapKeyedStateBackend, "rocksdb": RocksDBKeyedStateBackend}


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    clear_heap_cache()
    yield
    set_allow_pickle(True)
    clear_heap_cache()


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "marker"
    yield path
    assert not path.exists(), "a crafted pickle ran"


def _backend(kind: str, tmp_path: Path, sub: str) -> Any:
    params = KeyedStateBackendParameters(
        "job",
        "op",
        0,
        1,
        MAX_P,
        KeyGroupRange(0, MAX_P - 1),
        os.path.join(str(tmp_path), sub),
        SYSTEM_CLOCK,
        None,
    )
    return BACKENDS[kind](params)


def _meta(descriptor: ValueStateDescriptor) -> RegisteredStateMeta:
    return RegisteredStateMeta.from_descriptor(descriptor, PickleSerializer())


def _stream(
    states: list[RegisteredStateMeta],
    encoding: str,
    block_of: Callable[[int], bytes | None],
    snapshot_type: str = "savepoint",
    savepoint_handle: bool = True,
    backend: str = "heap",
) -> KeyGroupsStateHandle:
    header = SnapshotHeader(
        MAX_P, KeyGroupRange(0, MAX_P - 1), tuple(states), snapshot_type, backend, encoding
    )
    out = MemCheckpointStreamFactory().create_checkpoint_state_output_stream()
    handle = write_key_groups_snapshot(out, header, block_of)
    assert handle is not None
    if savepoint_handle:
        return KeyGroupsSavepointStateHandle(handle.group_range_offsets, handle.delegate)
    return KeyGroupsStateHandle(handle.group_range_offsets, handle.delegate, "h")


def _key_group(tmp_path: Path, key: Any) -> int:
    b = _backend("heap", tmp_path, "probe")
    kg = b.key_group_of(key)
    b.dispose()
    return int(kg)


def _pickle_stream(
    tmp_path: Path, objects: dict[Any, Any], meta: RegisteredStateMeta, **kw: Any
) -> KeyGroupsStateHandle:
    groups: dict[int, dict[Any, Any]] = {}
    for key, value in objects.items():
        groups.setdefault(_key_group(tmp_path, key), {})[key] = value
    return _stream(
        [meta],
        "pickle",
        lambda kg: pickle.dumps([(0, groups[kg])], protocol=5) if kg in groups else None,
        **kw,
    )


def _arrow_stream(
    tmp_path: Path, values: dict[Any, bytes], meta: RegisteredStateMeta
) -> KeyGroupsStateHandle:
    """An ``arrow`` savepoint whose value column holds ``values`` as given (bytes)."""
    keys = PickleSerializer()
    groups: dict[int, list[tuple[bytes, bytes]]] = {}
    for key, value in values.items():
        groups.setdefault(_key_group(tmp_path, key), []).append((keys.serialize(key), value))

    def columns(state_id: int, kg: int) -> Any:
        rows = groups.get(kg)
        return None if rows is None else ([k for k, _ in rows], None, [v for _, v in rows])

    return _stream([meta], "arrow", lambda kg: arrow_block(1, columns, kg))


def _read(backend: Any, descriptor: ValueStateDescriptor, keys: list[Any]) -> dict[Any, Any]:
    state = backend.get_partitioned_state(descriptor)
    out = {}
    for key in keys:
        backend.set_current_key(key)
        out[key] = state.value()
    return out


# ---- a savepoint header cannot switch typed state to pickle (always) ---------------------


@pytest.mark.parametrize("kind", sorted(BACKENDS))
@pytest.mark.parametrize(
    "says_savepoint",
    [
        {"snapshot_type": "savepoint", "savepoint_handle": True},
        {"snapshot_type": "checkpoint", "savepoint_handle": True},
        {"snapshot_type": "savepoint", "savepoint_handle": False},
        {"snapshot_type": "checkpoint", "savepoint_handle": False, "backend": "state-processor"},
    ],
    ids=["both", "handle", "header", "state-processor"],
)
def test_pickle_blocks_in_a_savepoint_are_refused_before_any_is_read(
    kind: str, says_savepoint: dict[str, Any], tmp_path: Path, marker: Path
) -> None:
    handle = _pickle_stream(tmp_path, {1: Plant(marker), 2: 7}, _meta(TYPED), **says_savepoint)
    b = _backend(kind, tmp_path, "restore")
    with pytest.raises(UntrustedSnapshotError, match="declares 'pickle' blocks in a savepoint"):
        b.restore([handle])
    b.dispose()


def test_a_header_saying_a_typed_state_is_pickled_is_refused_before_unpickling(
    tmp_path: Path, marker: Path
) -> None:
    """RocksDB keeps restored values as bytes until the job declares the state: the switch
    is refused then. (The heap decodes while restoring, before any state is declared: there
    only allow-pickle false keeps such a header from running code, the next test.)"""
    serializer = PickleSerializer()
    values = {1: serializer.serialize(Plant(marker)), 2: serializer.serialize(7)}
    handle = _arrow_stream(tmp_path, values, _meta(UNTYPED))
    b = _backend("rocksdb", tmp_path, "restore")
    b.restore([handle])  # the job declares its states after the restore
    with pytest.raises(UntrustedSnapshotError, match=r"State 'v' is declared with typed values"):
        b.get_partitioned_state(TYPED)
    b.dispose()


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_untyped_state_declared_untyped_restores_exactly(kind: str, tmp_path: Path) -> None:
    serializer = PickleSerializer()
    values = {k: serializer.serialize({"n": k, "tags": ("a", k)}) for k in range(40)}
    b = _backend(kind, tmp_path, "restore")
    b.restore([_arrow_stream(tmp_path, values, _meta(UNTYPED))])
    assert _read(b, UNTYPED, list(range(40))) == {k: {"n": k, "tags": ("a", k)} for k in range(40)}
    b.dispose()


# ---- allow-pickle false: plain data only ---------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_without_pickle_a_crafted_checkpoint_block_is_refused(
    kind: str, tmp_path: Path, marker: Path
) -> None:
    set_allow_pickle(False)
    handle = _pickle_stream(
        tmp_path,
        {1: Plant(marker), 2: 7},
        _meta(TYPED),
        snapshot_type="checkpoint",
        savepoint_handle=False,
    )
    b = _backend(kind, tmp_path, "restore")
    with pytest.raises(UntrustedSnapshotError, match=r"it names io\.open"):
        b.restore([handle])
        _read(b, TYPED, [1, 2])  # the heap decodes its blocks on first access
    b.dispose()


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_without_pickle_untyped_values_that_name_code_are_refused(
    kind: str, tmp_path: Path, marker: Path
) -> None:
    set_allow_pickle(False)
    serializer = PickleSerializer()
    values = {1: serializer.serialize(Plant(marker)), 2: serializer.serialize(7)}
    b = _backend(kind, tmp_path, "restore")
    with pytest.raises(UntrustedSnapshotError, match=r"allow-pickle is false"):
        b.restore([_arrow_stream(tmp_path, values, _meta(UNTYPED))])
        _read(b, UNTYPED, [1, 2])  # RocksDB decodes values when they are read
    b.dispose()


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_without_pickle_a_heap_checkpoint_of_plain_data_restores_exactly(
    kind: str, tmp_path: Path
) -> None:
    source = _backend("heap", tmp_path, "source")
    typed = source.get_partitioned_state(TYPED)
    untyped = source.get_partitioned_state(ValueStateDescriptor("u", Types.PICKLED_BYTE_ARRAY()))
    for key in range(50):
        source.set_current_key(key)
        typed.update(key * 3)
        untyped.update((key, f"k{key}", [key, None]))
    handle = source.snapshot(1, MemCheckpointStreamFactory(), SnapshotType.CHECKPOINT)()
    source.dispose()
    set_allow_pickle(False)
    b = _backend(kind, tmp_path, "restore")
    b.restore([handle])
    assert _read(b, TYPED, list(range(50))) == {k: k * 3 for k in range(50)}
    got = _read(b, ValueStateDescriptor("u", Types.PICKLED_BYTE_ARRAY()), list(range(50)))
    assert got == {k: (k, f"k{k}", [k, None]) for k in range(50)}
    b.dispose()
