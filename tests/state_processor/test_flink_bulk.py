"""The bulk reader of PyFlink's keyed state (``pyflink_bulk``) against the entry-by-entry
one it stands in for: the same state from real and generated savepoints, the same outcome
(value or error) for corrupted bytes, and the batch helpers it uses against the per-item
functions."""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import pytest

from bench.bench_flink_import import STATES as BENCH_STATES
from bench.bench_flink_import import write_flink_savepoint
from sparkpoint.errors import CorruptStateError, UntrustedSnapshotError
from sparkpoint.state import pickling
from sparkpoint.state.key_groups import assign_to_key_group, str_key_groups
from sparkpoint.state_processor.flink import (
    FlinkFormatError,
    UnsupportedFlinkStateError,
    import_flink_savepoint,
    pyflink_state,
    read_metadata_file,
    read_pyflink_keyed_state,
)
from sparkpoint.state_processor.flink.pyflink_bulk import Declined
from tests.state_processor.flink_savepoints.keyed_counts_states import STATES

HERE = Path(__file__).parent / "flink_savepoints"
REAL = ["hashmap", "rocksdb", "hashmap-snappy", "hashmap-thread"]


def _read(path: str, states: Any, bulk: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    """The state read with the bulk reader on or off, and how many subtasks it read."""
    used = [0]
    real = pyflink_state.read_subtask_bulk

    def counted(*args: Any) -> Any:
        if not bulk:
            raise Declined
        out = real(*args)
        used[0] += 1
        return out

    with monkeypatch.context() as m:
        m.setattr(pyflink_state, "read_subtask_bulk", counted)
        state = read_pyflink_keyed_state(read_metadata_file(path), "counter", states, "sp")
    return state.values, used[0]


@pytest.mark.parametrize("backend", REAL)
def test_real_savepoints_read_the_same_in_bulk(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(HERE / "keyed_counts" / backend / "savepoint")
    bulk, used = _read(path, STATES["counter"], True, monkeypatch)
    entries, _ = _read(path, STATES["counter"], False, monkeypatch)
    assert bulk == entries and len(bulk) == 5
    # process mode is read in bulk (both subtasks); thread mode's Java state is declined
    assert used == (0 if backend.endswith("thread") else 2)


def test_generated_savepoint_reads_the_same_in_bulk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_flink_savepoint(str(tmp_path / "f"), 3000)
    bulk, used = _read(str(tmp_path / "f"), BENCH_STATES["counter"], True, monkeypatch)
    entries, _ = _read(str(tmp_path / "f"), BENCH_STATES["counter"], False, monkeypatch)
    assert used == 2 and len(bulk) == 3000
    assert bulk == entries
    assert bulk["user-2999"] == {
        "count": 2999,
        "total": (2999, [2999 % 7]),
        "items": {"apple": 2999 % 5, "pear": 2999 % 5},
    }


def _outcome(path: str, bulk: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    try:
        return _read(path, BENCH_STATES["counter"], bulk, monkeypatch)[0]
    except (FlinkFormatError, UnsupportedFlinkStateError, UntrustedSnapshotError) as e:
        return (type(e).__name__, str(e))


def test_corrupt_state_bytes_give_the_same_outcome_in_bulk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes of a state file changed in turn (header, lengths, marks, keys, values): the
    bulk reader returns what the entry-by-entry reader returns, or raises its error."""
    src = tmp_path / "f"
    write_flink_savepoint(str(src), 12)
    state = src / "state-0"
    data = state.read_bytes()
    rng = random.Random(7)
    outcomes = {"same value": 0, "same error": 0}
    for pos in range(0, len(data), 7):
        bad = bytearray(data)
        bad[pos] = rng.choice([bad[pos] ^ 0xFF, bad[pos] ^ 0x01, 0x63, 0x80, 0x00])
        state.write_bytes(bytes(bad))
        got, want = _outcome(str(src), True, monkeypatch), _outcome(str(src), False, monkeypatch)
        assert got == want, pos
        outcomes["same error" if isinstance(want, tuple) else "same value"] += 1
    assert outcomes["same error"] > 300 and outcomes["same value"] > 50


def test_bulk_import_writes_what_the_state_is(tmp_path: Path) -> None:
    from sparkpoint.state.savepoint_format import read_savepoint_state
    from sparkpoint.state.serializers import PickleSerializer

    write_flink_savepoint(str(tmp_path / "f"), 500)
    target = import_flink_savepoint(str(tmp_path / "f"), str(tmp_path / "sp"), BENCH_STATES)
    rows = read_savepoint_state(target, "counter").to_pylist()
    keys = [PickleSerializer().deserialize(r["key"]) for r in rows]
    assert sorted(set(keys)) == sorted(f"user-{i}" for i in range(500))
    for r, key in zip(rows, keys):
        assert r["key_group"] == assign_to_key_group(key, 128)


PICKLES = [
    pickle.dumps(x, p)
    for p in (3, 4, 5)
    for x in ("user-1", "cipQ", 99, 0x6369, (1, [2, 3]), {"a": b"c"}, None, 1.5, "x" * 50)
] + [
    pickle.dumps(random.Random, 4),  # names a class
    b"\x80\x05K\x01",  # no STOP
    b"garbage",
    b"\x80\x04(" * 30 + b".",  # an unbalanced mark
]


@pytest.mark.parametrize("allow", [False, True])
def test_loads_many_is_loads_of_each(allow: bool) -> None:
    def each(datas: list[bytes]) -> Any:
        try:
            return [pickling.loads(d, "w") for d in datas]
        except (CorruptStateError, UntrustedSnapshotError) as e:
            return (type(e).__name__, str(e))

    def many(datas: list[bytes]) -> Any:
        try:
            return pickling.loads_many(datas, "w")
        except (CorruptStateError, UntrustedSnapshotError) as e:
            return (type(e).__name__, str(e))

    before = pickling.pickle_allowed()
    pickling.set_allow_pickle(allow)
    try:
        good = PICKLES[:27]
        assert many(good) == each(good) and isinstance(many(good), list)
        for bad in PICKLES[27:]:
            batch = [*good[:5], bad, *good[5:]]
            got = many(batch)
            assert got == each(batch)
            assert isinstance(got, tuple) or (allow and bad is PICKLES[27])
    finally:
        pickling.set_allow_pickle(before)


def test_str_key_groups_are_assign_to_key_group() -> None:
    rng = random.Random(3)
    alphabet = "abcXYZ019-_ ~\x7f\x00"
    keys = ["", "a", "user-1", "x" * 300, ""]
    keys += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    for max_p in (128, 1000, 32767):
        assert str_key_groups(keys, max_p).tolist() == [  # type: ignore[union-attr]
            assign_to_key_group(k, max_p) for k in keys
        ]
    assert str_key_groups(["é"], 128) is None and str_key_groups([1, "a"], 128) is None


def test_two_byte_key_group_prefix_reads_the_same_in_bulk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Max parallelism above 128: the key group takes two bytes of every key."""
    import struct

    from sparkpoint.common import Types
    from sparkpoint.datastream.state import ValueStateDescriptor
    from tests.state_processor import flink_bytes as fb

    value = struct.pack(">i", 8) + struct.pack(">q", 41)
    stream, offsets = fb.keyed_stream(
        [fb.state_meta("python-state-n", "LIST", fb.simple_snapshot(fb.BYTES))],
        [(0, b"\x00" + fb.pickled_row_key(pickle.dumps("k", 5)), value)],
    )
    (tmp_path / "state").write_bytes(stream)
    handle = fb.savepoint_handle("state", offsets, len(stream))
    ops = [fb.operator("counter", [fb.subtask(handle)], max_parallelism=256)]
    (tmp_path / "_metadata").write_bytes(fb.metadata(6, ops))
    desc = [ValueStateDescriptor("n", Types.LONG())]
    bulk, used = _read(str(tmp_path), desc, True, monkeypatch)
    assert used == 1 and bulk == {"k": {"n": 41}}
    assert _read(str(tmp_path), desc, False, monkeypatch)[0] == bulk


def test_a_key_in_two_subtasks_merges_as_entry_by_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One key pickled two ways, in key groups of two subtasks: its MAP entries merge."""
    import struct

    from sparkpoint.common import Types
    from sparkpoint.datastream.state import MapStateDescriptor
    from tests.state_processor import flink_bytes as fb

    wrapper = (
        "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
        "$ByteArrayWrapperSerializerSnapshot"
    )
    map_snapshot = fb.composite(
        "org.apache.flink.api.common.typeutils.base.MapSerializerSnapshot",
        [fb.simple_snapshot(wrapper), fb.simple_snapshot(fb.BYTES)],
    )

    def b(x: bytes) -> bytes:
        return struct.pack(">i", len(x)) + x

    subtasks = []
    for sub, (kg, protocol, item, count) in enumerate([(3, 5, b"a", 1), (70, 4, b"b", 2)]):
        row = fb.pickled_row_key(pickle.dumps("k", protocol))
        stream, offsets = fb.keyed_stream(
            [fb.state_meta("python-state-items", "MAP", map_snapshot)],
            [(kg, row + b(b(item)), b"\x00" + b(struct.pack(">q", count)))],
        )
        (tmp_path / f"state-{sub}").write_bytes(stream)
        lo = 0 if sub == 0 else 64
        handle = fb.savepoint_handle(f"state-{sub}", offsets[lo : lo + 64], len(stream), lo)
        subtasks.append(fb.subtask(handle))
    (tmp_path / "_metadata").write_bytes(
        fb.metadata(6, [fb.operator("counter", subtasks, parallelism=2)])
    )
    desc = [MapStateDescriptor("items", Types.STRING(), Types.LONG())]
    bulk, used = _read(str(tmp_path), desc, True, monkeypatch)
    assert used == 2 and bulk == {"k": {"items": {"a": 1, "b": 2}}}
    assert _read(str(tmp_path), desc, False, monkeypatch)[0] == bulk
