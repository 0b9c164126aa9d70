"""Importing real Flink savepoints of keyed_typed.py (issue 42): an INT key, Reducing and
Aggregating state of PyFlink's thread mode (Java ValueStates there), a thread-mode List
state, and a ValueState with a StateTtlConfig in both modes, whose Flink timestamps are
carried into sparkpoint. Recorded by scripts/record_flink_savepoints.py (keyed_typed,
hashmap and hashmap+thread); the expected state is computed here from the input.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.state.table import TtlValue
from sparkpoint.state_processor.flink import (
    UnsupportedFlinkStateError,
    import_flink_savepoint,
    read_metadata_file,
    read_pyflink_keyed_state,
)
from tests.state_processor.flink_savepoints.keyed_typed_states import KEY_TYPES, STATES
from tests.state_processor.test_flink_import import HERE, recorded

BACKENDS = ["hashmap", "hashmap+thread"]  # process mode, thread mode
_PREFIX = re.compile(r"^\d+> ")


def savepoint(backend: str) -> str:
    return str(HERE / "keyed_typed" / backend.replace("+", "-") / "savepoint")


def expected_state() -> dict[int, dict[str, object]]:
    """keyed_typed.py's state after the first half (``last`` without its timestamp)."""
    state: dict[int, dict[str, object]] = {}
    for line in recorded()["programs"]["keyed_typed/hashmap"]["input"]:
        name, item, amount = line.split(",")
        s = state.setdefault(sum(map(ord, name)), {"seen": [], "sum": 0, "mean": (0, 0)})
        s["seen"].append(item)  # type: ignore[attr-defined]
        s["sum"] += int(amount)  # type: ignore[operator]
        total, n = s["mean"]  # type: ignore[misc]
        s["mean"] = (total + int(amount), n + 1)
        s["last"] = int(amount)
    return state


def _flink_state(backend: str) -> dict[Any, dict[str, Any]]:
    metadata = read_metadata_file(savepoint(backend))
    return read_pyflink_keyed_state(metadata, "counter", STATES["counter"], "sp").values


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_state_under_an_int_key_with_its_ttl_timestamps(backend: str) -> None:
    values = _flink_state(backend)
    last = {k: v.pop("last") for k, v in values.items()}
    expected = expected_state()
    assert values == {k: {n: v for n, v in s.items() if n != "last"} for k, s in expected.items()}
    assert {k: v.value for k, v in last.items()} == {k: s["last"] for k, s in expected.items()}
    # Flink's last access timestamps (ms), taken while the first half ran
    stamps = [v.timestamp for v in last.values()]
    assert all(isinstance(v, TtlValue) for v in last.values())
    assert 1_700_000_000_000 < min(stamps) <= max(stamps) < min(stamps) + 600_000


@pytest.mark.parametrize("backend", BACKENDS)
def test_import_carries_flinks_ttl_timestamps(backend: str, tmp_path: Path) -> None:
    from sparkpoint.state.key_groups import KeyGroupAssigner
    from sparkpoint.state.savepoint_format import read_savepoint_state
    from sparkpoint.state.serializers import PickleSerializer
    from sparkpoint.state.table import RegisteredStateMeta

    flink = _flink_state(backend)
    target = import_flink_savepoint(
        savepoint(backend), str(tmp_path / "sp"), STATES, key_types=KEY_TYPES
    )
    last = RegisteredStateMeta.from_descriptor(STATES["counter"][3], PickleSerializer())
    rows = read_savepoint_state(target, "counter").to_pylist()
    got = {}
    for r in rows:
        key = PickleSerializer().deserialize(r["key"])
        assert r["key_group"] == KeyGroupAssigner(KEY_TYPES["counter"]).key_group(key, 128)
        if r["state_name"] == "last":
            got[key] = last.decode_value(r["value"])
    assert got == {k: v["last"] for k, v in flink.items()}  # TtlValue(value, Flink's ms)


def test_refuses_a_ttl_on_one_side_only(tmp_path: Path) -> None:
    from sparkpoint.common import Time, Types
    from sparkpoint.datastream.state import StateTtlConfig, ValueStateDescriptor

    plain = [*STATES["counter"][:3], ValueStateDescriptor("last", Types.LONG())]
    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(savepoint("hashmap"), str(tmp_path / "a"), {"counter": plain})
    assert str(e.value) == (
        f"Flink savepoint {savepoint('hashmap')}: operator 'counter' subtask 0, state 'last': "
        "the savepoint's state has a time-to-live (StateTtlConfig) and the descriptor has "
        "none; enable the same TTL on the descriptor (descriptor.enable_time_to_live(...)), "
        "as the program does"
    )
    with pytest.raises(UnsupportedFlinkStateError, match="state 'last': the savepoint's state"):
        import_flink_savepoint(savepoint("hashmap+thread"), str(tmp_path / "b"), {"counter": plain})
    sum_ttl = ValueStateDescriptor("count", Types.LONG())
    sum_ttl.enable_time_to_live(StateTtlConfig.new_builder(Time.days(1)).build())
    from tests.state_processor.flink_savepoints.keyed_counts_states import STATES as COUNTS

    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(
            str(HERE / "keyed_counts" / "hashmap" / "savepoint"),
            str(tmp_path / "c"),
            {"counter": [sum_ttl, *COUNTS["counter"][1:]]},
        )
    assert str(e.value).endswith(
        "state 'count': the descriptor has a time-to-live and the savepoint's state has none; "
        "Flink would not restore it so either: pass the descriptor the program had"
    )
    assert not any((tmp_path / d).exists() for d in "abc")


@pytest.mark.parametrize("backend", BACKENDS)
def test_resumes_thread_mode_and_ttl_state_as_pyflink_does(
    spark: Any, backend: str, tmp_path: Path
) -> None:
    from tests.differential.runner import run_program

    target = import_flink_savepoint(
        savepoint(backend), str(tmp_path / "imported"), STATES, key_types=KEY_TYPES
    )
    mode = ("thread",) if backend.endswith("+thread") else ()
    printed = run_program(HERE / "keyed_typed.py", ("second", target, *mode))
    expected = sorted(
        _PREFIX.sub("", line)
        for line in recorded()["programs"][f"keyed_typed/{backend}"]["second_half"]
    )
    assert len(expected) == 10
    # only frank (530) is new: every other key's TTL'd value came through the savepoint
    assert [line for line in expected if "previous=None" in line] == [
        "530 count=sum=9 mean=9.0 seen=lime previous=None"
    ]
    got = sorted(_PREFIX.sub("", line) for line in printed.splitlines() if " count=" in line)
    assert got == expected


def test_refuses_a_ttl_timestamp_that_is_not_a_long(tmp_path: Path) -> None:
    from tests.state_processor import flink_bytes as fb

    ttl = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
    ints = "org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot"
    longs = "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
    snapshot = fb.composite(ttl, [fb.simple_snapshot(ints), fb.simple_snapshot(longs)])
    stream, offsets = fb.keyed_stream([fb.state_meta("last", "VALUE", snapshot)], [])
    (tmp_path / "state").write_bytes(stream)
    handle = fb.savepoint_handle("state", offsets, len(stream))
    (tmp_path / "_metadata").write_bytes(
        fb.metadata(5, [fb.operator("counter", [fb.subtask(handle)])])
    )
    with pytest.raises(UnsupportedFlinkStateError) as e:
        read_pyflink_keyed_state(
            read_metadata_file(str(tmp_path)), "counter", [STATES["counter"][3]], "sp"
        )
    assert str(e.value) == "sp: operator 'counter' subtask 0, state 'last': a TTL timestamp of int"
