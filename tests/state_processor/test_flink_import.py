"""Reading and importing real Flink savepoints of a PyFlink job (issue 42), pure Python.

The savepoints under flink_savepoints/ were taken by PyFlink 2.3 (scripts/
record_flink_savepoints.py): keyed_counts.py's first half over ``recorded.json``'s input.
The expected state is computed here from that input, independently of the reader.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import shutil
import struct
from pathlib import Path

import pytest

from sparkpoint.errors import UntrustedSnapshotError
from sparkpoint.state_processor.flink import (
    FlinkFormatError,
    UnsupportedFlinkStateError,
    import_flink_savepoint,
    read_metadata_file,
    read_pyflink_keyed_state,
)
from sparkpoint.state_processor.flink.keyed_state import read_keyed_state_stream
from sparkpoint.state_processor.flink.metadata import read_metadata
from sparkpoint.state_processor.flink.operator_ids import murmur3_x64_128, operator_id_of_uid
from tests.state_processor import flink_bytes as fb
from tests.state_processor.flink_savepoints.keyed_counts_states import STATES

HERE = Path(__file__).parent / "flink_savepoints"


@functools.cache
def recorded() -> dict:
    return json.loads((HERE / "recorded.json").read_text())


# +snappy: Snappy-compressed key groups; +thread: PyFlink's thread mode (Java-typed state)
BACKENDS = ["hashmap", "rocksdb", "hashmap+snappy", "hashmap+thread"]
METADATA_VERSION = 6  # what Flink 2.3 writes for savepoints


def savepoint(backend: str) -> str:
    return str(HERE / "keyed_counts" / backend.replace("+", "-") / "savepoint")


def expected_state() -> dict[str, dict[str, object]]:
    """keyed_counts.py's Counter state after the first half, from its input."""
    state: dict[str, dict[str, object]] = {}
    for line in recorded()["programs"]["keyed_counts/hashmap"]["input"]:
        key, item, amount = line.split(",")
        s = state.setdefault(key, {"count": 0, "total": (0, []), "items": {}})
        s["count"] += 1  # type: ignore[operator]
        total, last = s["total"]  # type: ignore[misc]
        s["total"] = (total + int(amount), [*last, int(amount)][-3:])
        items = s["items"]
        items[item] = items.get(item, 0) + 1  # type: ignore[union-attr,attr-defined]
    return state


def test_operator_id_is_murmur3_128_of_the_uid() -> None:
    assert murmur3_x64_128(b"hello").hex() == "029bbd41b3a7d8cb191dae486a901e5b"
    # Flink's own id of uid "counter", as the savepoint records it
    meta = read_metadata_file(savepoint("hashmap"))
    (op,) = [o for o in meta.operators if o.uid == "counter"]
    assert op.operator_id == operator_id_of_uid("counter")


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_the_metadata(backend: str) -> None:
    meta = read_metadata_file(savepoint(backend))
    assert meta.version == METADATA_VERSION
    assert meta.checkpoint_id > 0
    op = meta.operator("counter")
    assert op is not None and op.name == "counter"
    assert (op.parallelism, op.max_parallelism) == (2, 128)
    handles = [s.managed_keyed_state for s in op.subtasks if s.managed_keyed_state]
    assert handles and all(h.savepoint for h in handles)
    header, _ = read_keyed_state_stream(handles[0], 128, "test")
    assert header.compressed == backend.endswith("+snappy")
    names = {s.name for s in header.states if s.backend_type == "KEY_VALUE"}
    prefix = "" if backend.endswith("+thread") else "python-state-"
    assert names == {prefix + n for n in ("count", "total", "items")}
    # the two subtasks own key groups 0..63 and 64..127
    assert sorted((h.start_key_group, len(h.offsets)) for h in handles) == [(0, 64), (64, 64)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_pyflink_state_as_python_objects(backend: str) -> None:
    meta = read_metadata_file(savepoint(backend))
    state = read_pyflink_keyed_state(meta, "counter", STATES["counter"], "test")
    assert state.values == expected_state()


@pytest.mark.parametrize("backend", BACKENDS)
def test_import_writes_a_sparkpoint_savepoint_with_the_same_state(
    backend: str, tmp_path: Path
) -> None:
    from sparkpoint.state.key_groups import KeyGroupAssigner
    from sparkpoint.state.savepoint_format import read_savepoint_state
    from sparkpoint.state.serializers import PickleSerializer
    from sparkpoint.state.table import RegisteredStateMeta

    target = import_flink_savepoint(savepoint(backend), str(tmp_path / "sp"), STATES)
    metas = {
        d.name: RegisteredStateMeta.from_descriptor(d, PickleSerializer())
        for d in STATES["counter"]
    }
    got: dict[object, dict[str, object]] = {}
    rows = read_savepoint_state(target, "counter").to_pylist()
    assert {r["subtask"] for r in rows} == {0, 1}  # Flink's parallelism, 2
    for r in rows:
        meta = metas[r["state_name"]]
        key = meta.decode_key(r["key"])
        # re-placed by sparkpoint's rule for untyped keys (Flink hashed the pickle bytes)
        assert r["key_group"] == KeyGroupAssigner(None).key_group(key, 128)
        assert r["subtask"] == r["key_group"] * 2 // 128
        states = got.setdefault(key, {})
        if r["user_key"] is None:
            states[r["state_name"]] = meta.decode_value(r["value"])
        else:
            entries = states.setdefault(r["state_name"], {})
            entries[meta.decode_user_key(r["user_key"])] = meta.decode_value(r["value"])  # type: ignore[index]
    assert got == expected_state()


def test_import_refuses_a_non_empty_target(tmp_path: Path) -> None:
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "x").write_text("keep me")
    with pytest.raises(Exception, match="exists and is not an empty directory"):
        import_flink_savepoint(savepoint("hashmap"), str(tmp_path / "sp"), STATES)
    assert (tmp_path / "sp" / "x").read_text() == "keep me"


# -- refusals -------------------------------------------------------------------------------


def _copy(tmp_path: Path, backend: str = "hashmap") -> Path:
    dest = tmp_path / "flink"
    shutil.copytree(savepoint(backend), dest)
    return dest


def test_refuses_an_unknown_metadata_version(tmp_path: Path) -> None:
    sp = _copy(tmp_path)
    data = bytearray((sp / "_metadata").read_bytes())
    data[4:8] = struct.pack(">i", 99)
    (sp / "_metadata").write_bytes(data)
    with pytest.raises(FlinkFormatError, match="_metadata format version 99 is not supported"):
        read_metadata_file(str(sp))


def test_refuses_a_file_that_is_not_flink_metadata(tmp_path: Path) -> None:
    (tmp_path / "_metadata").write_bytes(b"PK\x03\x04 not flink")
    with pytest.raises(FlinkFormatError, match="not a Flink _metadata file"):
        read_metadata_file(str(tmp_path))


def test_every_truncation_of_metadata_is_refused(tmp_path: Path) -> None:
    data = (Path(savepoint("hashmap")) / "_metadata").read_bytes()
    end = data.index(b"\xac\xed\x00\x05")  # Java serialization: the trailing properties
    refused = 0
    for cut in range(0, end, max(1, end // 300)):
        with pytest.raises(FlinkFormatError):
            read_metadata(data[:cut], "cut", str(tmp_path))
        refused += 1
    assert refused >= 100


def test_refuses_incremental_state() -> None:
    data = fb.metadata(5, [fb.operator("counter", [fb.subtask(fb.incremental_handle())])])
    with pytest.raises(UnsupportedFlinkStateError, match="incremental RocksDB state"):
        read_metadata(data, "sp/_metadata", "/tmp")


def test_refuses_operators_without_uid(tmp_path: Path) -> None:
    stream, offsets = fb.keyed_stream(
        [fb.state_meta("python-state-count", "LIST", fb.simple_snapshot(fb.BYTES))],
        [(0, fb.pickled_row_key(pickle.dumps("k")), struct.pack(">i", 8) + b"\0" * 8)],
    )
    (tmp_path / "state").write_bytes(stream)
    handle = fb.savepoint_handle("state", offsets, len(stream))
    ops = [fb.operator(None, [fb.subtask(handle)], name="Keyed Process")]
    (tmp_path / "_metadata").write_bytes(fb.metadata(5, ops))
    meta = read_metadata_file(str(tmp_path))
    with pytest.raises(UnsupportedFlinkStateError) as err:
        read_pyflink_keyed_state(meta, "counter", STATES["counter"], "sp")
    assert "no operator with uid 'counter'" in str(err.value)
    assert "without a uid" in str(err.value) and "(Keyed Process)" in str(err.value)


def test_refuses_state_files_outside_the_savepoint(tmp_path: Path) -> None:
    handle = fb.savepoint_handle("../elsewhere", [0] * 128, 10)
    data = fb.metadata(5, [fb.operator("counter", [fb.subtask(handle)])])
    with pytest.raises(FlinkFormatError, match="lies outside the savepoint directory"):
        read_metadata(data, "sp/_metadata", str(tmp_path))


def _one_state_savepoint(tmp_path: Path, value_snapshot: bytes, key: bytes, value: bytes):
    stream, offsets = fb.keyed_stream(
        [fb.state_meta("python-state-count", "LIST", value_snapshot)], [(5, key, value)]
    )
    (tmp_path / "state").write_bytes(stream)
    handle = fb.savepoint_handle("state", offsets, len(stream))
    (tmp_path / "_metadata").write_bytes(
        fb.metadata(5, [fb.operator("counter", [fb.subtask(handle)])])
    )
    return read_metadata_file(str(tmp_path))


def test_refuses_kryo_serialized_state(tmp_path: Path) -> None:
    kryo = fb.simple_snapshot(
        "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
    )
    meta = _one_state_savepoint(tmp_path, kryo, b"", b"")
    with pytest.raises(UnsupportedFlinkStateError, match="a Kryo-serialized type"):
        read_pyflink_keyed_state(meta, "counter", STATES["counter"], "sp")


def test_refuses_unknown_serializers(tmp_path: Path) -> None:
    odd = fb.simple_snapshot("com.example.MySerializer$Snapshot")
    meta = _one_state_savepoint(tmp_path, odd, b"", b"")
    with pytest.raises(
        UnsupportedFlinkStateError, match=r"com\.example\.MySerializer.*does not know"
    ):
        read_pyflink_keyed_state(meta, "counter", STATES["counter"], "sp")


def test_pickled_keys_naming_code_are_refused_unless_allowed(tmp_path: Path) -> None:
    evil = pickle.dumps(os.getcwd)  # names a function: loading it would run code
    meta = _one_state_savepoint(
        tmp_path,
        fb.simple_snapshot(fb.BYTES),
        fb.pickled_row_key(evil),
        fb.list_value([struct.pack(">q", 3)]),
    )
    only = {"counter": [STATES["counter"][0]]}
    with pytest.raises(UntrustedSnapshotError, match=r"posix\.getcwd"):
        read_pyflink_keyed_state(meta, "counter", only["counter"], "sp")
    state = read_pyflink_keyed_state(meta, "counter", only["counter"], "sp", allow_pickle=True)
    assert state.values == {os.getcwd: {"count": 3}}


def test_refuses_corrupt_key_group_offsets(tmp_path: Path) -> None:
    meta = _one_state_savepoint(
        tmp_path,
        fb.simple_snapshot(fb.BYTES),
        fb.pickled_row_key(pickle.dumps("k")),
        fb.list_value([struct.pack(">q", 3)]),
    )
    (tmp_path / "state").write_bytes((tmp_path / "state").read_bytes()[:-9])
    with pytest.raises(FlinkFormatError, match="truncated"):
        read_pyflink_keyed_state(meta, "counter", [STATES["counter"][0]], "sp")


def test_refuses_a_state_no_descriptor_names(tmp_path: Path) -> None:
    meta = read_metadata_file(savepoint("hashmap"))
    with pytest.raises(UnsupportedFlinkStateError, match="state 'items', which no descriptor"):
        read_pyflink_keyed_state(meta, "counter", STATES["counter"][:2], "sp")


# -- the command line --------------------------------------------------------------------------

STATES_SPEC = "tests.state_processor.flink_savepoints.keyed_counts_states:STATES"


def test_cli_import_flink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sparkpoint.cli.main import main
    from sparkpoint.state.savepoint_format import read_savepoint_state

    target = str(tmp_path / "sp")
    code = main(
        ["savepoint", "import-flink", savepoint("rocksdb"), target, "--states", STATES_SPEC]
    )
    assert code == 0
    assert capsys.readouterr().out == f"Imported counter -> {target}\n"
    rows = read_savepoint_state(target, "counter").to_pylist()
    expected = expected_state()
    # one row per key and VALUE state, one per map entry
    n_items = sum(len(s["items"]) for s in expected.values())  # type: ignore[arg-type]
    assert len(rows) == 2 * len(expected) + n_items


def test_cli_import_flink_refusal_names_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparkpoint.cli.exit_codes import EXIT_ERROR
    from sparkpoint.cli.main import main

    code = main(
        [
            "savepoint",
            "import-flink",
            savepoint("hashmap"),
            str(tmp_path / "sp"),
            "--states",
            "tests.state_processor.flink_savepoints.keyed_counts_states",
        ]
    )
    assert code == EXIT_ERROR
    assert "give module:attribute" in capsys.readouterr().err
    assert not (tmp_path / "sp").exists()


def test_refuses_native_format_keyed_state(tmp_path: Path) -> None:
    stream, offsets = fb.keyed_stream(
        [fb.state_meta("python-state-count", "LIST", fb.simple_snapshot(fb.BYTES))],
        [(5, fb.pickled_row_key(pickle.dumps("k")), fb.list_value([struct.pack(">q", 3)]))],
    )
    (tmp_path / "state").write_bytes(stream)
    savepoint_handle = fb.savepoint_handle("state", offsets, len(stream))
    # KEY_GROUPS_HANDLE_V2 (12): a checkpoint's or native savepoint's handle, with an id
    native = b"\x0c" + savepoint_handle[1:] + fb.utf("handle-id")
    ops = [fb.operator("counter", [fb.subtask(native)])]
    (tmp_path / "_metadata").write_bytes(fb.metadata(6, ops))
    meta = read_metadata_file(str(tmp_path))
    with pytest.raises(UnsupportedFlinkStateError, match="not in the canonical savepoint format"):
        read_pyflink_keyed_state(meta, "counter", [STATES["counter"][0]], "sp")


@pytest.mark.parametrize("backend", ["hashmap"])
def test_corrupt_bytes_are_refused_as_such(backend: str, tmp_path: Path) -> None:
    """Every byte of the real _metadata (state inline) flipped in turn: the reader reports a
    format, unsupported or untrusted-pickle error, or reads a (different) state; never
    another exception, and never unbounded allocation."""
    data = (Path(savepoint(backend)) / "_metadata").read_bytes()
    end = data.index(b"\xac\xed\x00\x05")
    outcomes = {"refused": 0, "read": 0}
    for pos in range(8, end, 11):
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        try:
            meta = read_metadata(bytes(bad), "bad", str(tmp_path))
            read_pyflink_keyed_state(meta, "counter", STATES["counter"], "bad")
            outcomes["read"] += 1
        except (FlinkFormatError, UnsupportedFlinkStateError, UntrustedSnapshotError):
            outcomes["refused"] += 1
    assert outcomes["refused"] > 300 and sum(outcomes.values()) == len(range(8, end, 11))


def test_list_state_elements_in_order(tmp_path: Path) -> None:
    """RocksDB's list layout (the one the real savepoints hold, here with three elements):
    each element's bytes after its length, joined by ','."""
    from sparkpoint.common import Types
    from sparkpoint.datastream.state import ListStateDescriptor

    elements = [pickle.dumps(x) for x in ("a", ("b", 2), None)]
    stream, offsets = fb.keyed_stream(
        [fb.state_meta("python-state-buffer", "LIST", fb.simple_snapshot(fb.BYTES))],
        [
            (
                9,
                fb.pickled_row_key(pickle.dumps(42)),
                fb.list_value([struct.pack(">i", len(e)) + e for e in elements]),
            )
        ],
    )
    (tmp_path / "state").write_bytes(stream)
    handle = fb.savepoint_handle("state", offsets, len(stream))
    ops = [fb.operator("buffer", [fb.subtask(handle)])]
    (tmp_path / "_metadata").write_bytes(fb.metadata(6, ops))
    meta = read_metadata_file(str(tmp_path))
    desc = ListStateDescriptor("buffer", Types.PICKLED_BYTE_ARRAY())
    state = read_pyflink_keyed_state(meta, "buffer", [desc], "sp")
    assert state.values == {42: {"buffer": ["a", ("b", 2), None]}}
    # a VALUE descriptor for a list of three is refused, naming the key and the count
    from sparkpoint.datastream.state import ValueStateDescriptor

    value = ValueStateDescriptor("buffer", Types.PICKLED_BYTE_ARRAY())
    with pytest.raises(FlinkFormatError, match="key 42 holds 3 elements, a VALUE state holds one"):
        read_pyflink_keyed_state(meta, "buffer", [value], "sp")


# -- List, Reducing and Aggregating state under a typed key (keyed_lists.py) -----------------


def expected_lists_state() -> dict[str, dict[str, object]]:
    """keyed_lists.py's state after the first half, from its input."""
    state: dict[str, dict[str, object]] = {}
    for line in recorded()["programs"]["keyed_lists/hashmap"]["input"]:
        key, item, amount = line.split(",")
        s = state.setdefault(key, {"seen": [], "sum": 0, "mean": (0, 0)})
        s["seen"].append(item)  # type: ignore[attr-defined]
        s["sum"] += int(amount)  # type: ignore[operator]
        total, n = s["mean"]  # type: ignore[misc]
        s["mean"] = (total + int(amount), n + 1)
    return state


def test_reads_list_reducing_aggregating_state_under_a_typed_key(tmp_path: Path) -> None:
    from sparkpoint.common import Types
    from sparkpoint.state.key_groups import KeyGroupAssigner
    from sparkpoint.state.savepoint_format import read_savepoint_state
    from sparkpoint.state.serializers import PickleSerializer
    from tests.state_processor.flink_savepoints.keyed_lists_states import (
        KEY_TYPES,
    )
    from tests.state_processor.flink_savepoints.keyed_lists_states import (
        STATES as LIST_STATES,
    )

    sp = str(HERE / "keyed_lists" / "hashmap" / "savepoint")
    state = read_pyflink_keyed_state(read_metadata_file(sp), "counter", LIST_STATES["counter"], "t")
    assert state.values == expected_lists_state()
    target = import_flink_savepoint(sp, str(tmp_path / "sp"), LIST_STATES, key_types=KEY_TYPES)
    rows = read_savepoint_state(target, "counter").to_pylist()
    typed = KeyGroupAssigner(Types.STRING())

    for r in rows:  # placed by the typed key's rule
        key = PickleSerializer().deserialize(r["key"])
        assert r["key_group"] == typed.key_group(key, 128)
    assert {PickleSerializer().deserialize(r["key"]) for r in rows} == set(expected_lists_state())


def test_cli_import_flink_with_key_types(tmp_path: Path) -> None:
    from sparkpoint.cli.main import main
    from sparkpoint.common import Types
    from sparkpoint.state.key_groups import KeyGroupAssigner
    from sparkpoint.state.savepoint_format import read_savepoint_state
    from sparkpoint.state.serializers import PickleSerializer

    module = "tests.state_processor.flink_savepoints.keyed_lists_states"
    target = str(tmp_path / "sp")
    source = str(HERE / "keyed_lists" / "hashmap" / "savepoint")
    args = ["--states", f"{module}:STATES", "--key-types", f"{module}:KEY_TYPES"]
    assert main(["savepoint", "import-flink", source, target, *args]) == 0
    rows = read_savepoint_state(target, "counter").to_pylist()
    assert len(rows) == 3 * 5  # three states of five keys
    for r in rows:
        key = PickleSerializer().deserialize(r["key"])
        assert r["key_group"] == KeyGroupAssigner(Types.STRING()).key_group(key, 128)
