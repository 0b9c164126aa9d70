"""Importing PyFlink's timers and window state from real Flink savepoints (issue 42's second
and third programs), pure Python.

The savepoints under flink_savepoints/timer_buffer and flink_savepoints/tumbling_window were
taken by PyFlink 2.3 (scripts/record_flink_savepoints.py) after the first half of
timer_buffer.py and tumbling_window.py over ``recorded.json``'s input. The expected state is
computed here from that input, independently of the reader.
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.state_processor.flink import (
    UnsupportedFlinkStateError,
    import_flink_savepoint,
    read_metadata_file,
    read_pyflink_keyed_state,
)
from sparkpoint.state_processor.flink.timers import FlinkTimer
from sparkpoint.state_processor.flink.windows import TimeWindowPickle, dumps
from tests.state_processor.flink_savepoints.timer_buffer_states import STATES as BUFFER
from tests.state_processor.flink_savepoints.tumbling_window_states import STATES as WINDOWS
from tests.state_processor.test_flink_import import HERE, recorded

BACKENDS = ["hashmap", "rocksdb"]
BUCKET = 10_000
FAR = 4_102_444_800_000  # timer_buffer.py's processing-time timer
EVENT, PROCESSING = 0, 1


def fixture(program: str, backend: str) -> str:
    return str(HERE / program / backend / "savepoint")


def timed_input(program: str) -> list[tuple[str, str, int]]:
    lines = recorded()["programs"][f"{program}/hashmap"]["input"]
    return [(k, item, int(ts)) for k, item, ts in (line.split(",") for line in lines)]


def expected_buffer() -> tuple[dict[str, dict[str, Any]], set[FlinkTimer]]:
    """timer_buffer.py's state after the first half: per key its count and the records of
    the last bucket (the flushes at 10000 and 20000 fired), one event-time timer at the
    bucket's end and the far processing-time timer."""
    records = timed_input("timer_buffer")
    last = max(ts for _, _, ts in records) // BUCKET * BUCKET
    values: dict[str, dict[str, Any]] = {}
    timers = set()
    for key, item, ts in records:
        s = values.setdefault(key, {"seen": 0, "buffer": []})
        s["seen"] += 1
        if ts >= last:
            s["buffer"].append((ts, item))
        timers.add(FlinkTimer(PROCESSING, FAR, key, None))
        if ts >= last:
            timers.add(FlinkTimer(EVENT, last + BUCKET, key, None))
    return values, timers


def expected_windows() -> tuple[dict[str, dict[str, Any]], set[FlinkTimer]]:
    """tumbling_window.py's state after the first half: per key the records of the last
    window (the first two fired), and that window's timer at its max timestamp."""
    records = timed_input("tumbling_window")
    start = max(ts for _, _, ts in records) // BUCKET * BUCKET
    window = (start, start + BUCKET)
    values: dict[str, dict[str, Any]] = {}
    timers = set()
    for key, item, ts in records:
        if ts >= start:
            contents = values.setdefault(key, {"window-contents": {window: []}})
            contents["window-contents"][window].append((key, item, ts))
            timers.add(FlinkTimer(EVENT, window[1] - 1, key, window))
    return values, timers


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_pending_event_and_processing_time_timers(backend: str) -> None:
    meta = read_metadata_file(fixture("timer_buffer", backend))
    state = read_pyflink_keyed_state(meta, "buffer", BUFFER["buffer"], "test")
    values, timers = expected_buffer()
    assert state.values == values
    assert len(state.timers) == len(timers) == 10  # five keys, one timer per domain each
    assert set(state.timers) == timers


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_window_contents_and_window_timers(backend: str) -> None:
    meta = read_metadata_file(fixture("tumbling_window", backend))
    state = read_pyflink_keyed_state(meta, "windows", WINDOWS["windows"], "test")
    values, timers = expected_windows()
    assert state.values == values
    assert state.windowed_states == {"window-contents"}
    assert len(state.timers) == len(timers) == 5
    assert set(state.timers) == timers


def _imported(target: str, uid: str, descriptors: list[Any]) -> dict[Any, dict[str, Any]]:
    """The state of ``uid`` in the sparkpoint savepoint ``target``, per key and state."""
    from sparkpoint.state.savepoint_format import read_savepoint_state
    from sparkpoint.state.serializers import PickleSerializer
    from sparkpoint.state.table import RegisteredStateMeta

    metas = {
        d.name: RegisteredStateMeta.from_descriptor(d, PickleSerializer()) for d in descriptors
    }
    got: dict[Any, dict[str, Any]] = {}
    rows = read_savepoint_state(target, uid).to_pylist()
    for r in rows:
        meta = metas[r["state_name"]]
        states = got.setdefault(meta.decode_key(r["key"]), {})
        if r["user_key"] is None:
            states[r["state_name"]] = meta.decode_value(r["value"])
        else:
            entries = states.setdefault(r["state_name"], {})
            entries[meta.decode_user_key(r["user_key"])] = meta.decode_value(r["value"])
    return got


def _sparkpoint_descriptors(*names: str) -> list[Any]:
    from sparkpoint.common import Types
    from sparkpoint.datastream.state import MapStateDescriptor

    pickled = Types.PICKLED_BYTE_ARRAY()
    types = {"__sparkpoint_timers__": Types.BOOLEAN()}
    return [MapStateDescriptor(n, pickled, types.get(n, pickled)) for n in names]


@pytest.mark.parametrize("backend", BACKENDS)
def test_import_writes_timers_as_sparkpoint_keeps_them(backend: str, tmp_path: Path) -> None:
    target = import_flink_savepoint(fixture("timer_buffer", backend), str(tmp_path / "sp"), BUFFER)
    got = _imported(
        target, "buffer", [*BUFFER["buffer"], *_sparkpoint_descriptors("__sparkpoint_timers__")]
    )
    values, timers = expected_buffer()
    for t in timers:
        values[t.key].setdefault("__sparkpoint_timers__", {})[(t.domain, t.timestamp)] = True
    assert got == values


@pytest.mark.parametrize("backend", BACKENDS)
def test_import_writes_windows_as_sparkpoints_window_operator_keeps_them(
    backend: str, tmp_path: Path
) -> None:
    from sparkpoint.datastream.window import TimeWindow

    source = fixture("tumbling_window", backend)
    target = import_flink_savepoint(source, str(tmp_path / "sp"), WINDOWS)
    names = ("_window.contents", "_window.timers", "__sparkpoint_timers__")
    got = _imported(target, "windows", _sparkpoint_descriptors(*names))
    values, _ = expected_windows()
    expected: dict[Any, dict[str, Any]] = {}
    for key, states in values.items():
        ((start, end), records) = next(iter(states["window-contents"].items()))
        expected[key] = {
            "_window.contents": {TimeWindow(start, end): records},
            "_window.timers": {(EVENT, end - 1): [TimeWindow(start, end)]},
            "__sparkpoint_timers__": {(EVENT, end - 1): True},
        }
    assert got == expected
    assert all(type(w) is TimeWindow for s in got.values() for w in s["_window.contents"])


def test_runtime_names_agree() -> None:
    """The flink package writes the runtime's state names without importing the runtime."""
    from sparkpoint.runtime.operators import window_operator
    from sparkpoint.runtime.operators.context import TIMERS_STATE
    from sparkpoint.runtime.operators.time_domain import TimeDomain
    from sparkpoint.state_processor.flink import timers, windows

    assert timers.SPARKPOINT_TIMERS_STATE == TIMERS_STATE
    assert (timers.EVENT_TIME, timers.PROCESSING_TIME) == (
        TimeDomain.EVENT_TIME.value,
        TimeDomain.PROCESSING_TIME.value,
    )
    assert windows.SPARKPOINT_CONTENTS == window_operator.CONTENTS
    assert windows.SPARKPOINT_WINDOW_TIMERS == window_operator.TIMERS


@pytest.mark.parametrize("start,end", [(0, 10), (20_000, 30_000), (-5, 2**40), (2**62, 2**63 - 1)])
def test_time_windows_pickle_byte_for_byte_as_sparkpoints(start: int, end: int) -> None:
    """A window's pickle is a map key (RocksDB finds it by its bytes): it must be what
    pickling sparkpoint's TimeWindow gives, also inside a list."""
    from sparkpoint.datastream.window import TimeWindow

    assert dumps(TimeWindowPickle(start, end)) == pickle.dumps(TimeWindow(start, end), protocol=5)
    pair = [TimeWindowPickle(start, end), TimeWindowPickle(1, 2)]
    assert dumps(pair) == pickle.dumps([TimeWindow(start, end), TimeWindow(1, 2)], protocol=5)
    assert pickle.loads(dumps(TimeWindowPickle(start, end))) == TimeWindow(start, end)


def _patched(source: str, tmp_path: Path, old: bytes, new: bytes) -> str:
    """A copy of the savepoint ``source`` with ``old`` replaced by ``new`` (the same length)
    in its files (small state sits inside _metadata)."""
    assert len(old) == len(new)
    copy = tmp_path / "patched"
    shutil.copytree(source, copy)
    hits = 0
    for f in copy.iterdir():
        data = f.read_bytes()
        if old in data:
            hits += data.count(old)
            f.write_bytes(data.replace(old, new))
    assert hits > 0
    return str(copy)


def test_refuses_timers_of_another_timer_service(tmp_path: Path) -> None:
    """A Java operator's timer service (not PyFlink's ``user-timers``) is refused by name
    when it holds timers."""
    patched = _patched(
        fixture("timer_buffer", "hashmap"), tmp_path, b"event_user-timers", b"event_java-timers"
    )
    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(patched, str(tmp_path / "sp"), BUFFER)
    assert "timer state '_timer_state/event_java-timers'" in str(e.value)
    assert "timer service 'java-timers' is not PyFlink's 'user-timers'" in str(e.value)
    assert not (tmp_path / "sp").exists()


def test_refuses_other_state_in_window_namespaces(tmp_path: Path) -> None:
    """Per-window state other than the contents (a trigger's, a ProcessWindowFunction's
    window_state()) is refused by name."""
    from sparkpoint.common import Types
    from sparkpoint.datastream.state import ListStateDescriptor

    patched = _patched(
        fixture("tumbling_window", "hashmap"),
        tmp_path,
        b"python-state-window-contents",
        b"python-state-window-counters",
    )
    states = {"windows": [ListStateDescriptor("window-counters", Types.PICKLED_BYTE_ARRAY())]}
    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(patched, str(tmp_path / "sp"), states)
    assert "state 'window-counters' in window namespaces" in str(e.value)
    assert "only the window contents ('window-contents') are imported" in str(e.value)
    assert not (tmp_path / "sp").exists()


def test_refuses_window_contents_of_a_value_or_map_descriptor(tmp_path: Path) -> None:
    from sparkpoint.common import Types
    from sparkpoint.datastream.state import ValueStateDescriptor

    states = {"windows": [ValueStateDescriptor("window-contents", Types.PICKLED_BYTE_ARRAY())]}
    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(fixture("tumbling_window", "hashmap"), str(tmp_path / "sp"), states)
    assert "state 'window-contents': state in window namespaces read by a VALUE descriptor" in str(
        e.value
    )


def test_refuses_the_window_set_of_session_windows(tmp_path: Path) -> None:
    from sparkpoint.common import Types
    from sparkpoint.datastream.state import MapStateDescriptor

    pickled = Types.PICKLED_BYTE_ARRAY()
    states = {
        "windows": [*WINDOWS["windows"], MapStateDescriptor("merging-window-set", pickled, pickled)]
    }
    with pytest.raises(UnsupportedFlinkStateError) as e:
        import_flink_savepoint(fixture("tumbling_window", "hashmap"), str(tmp_path / "sp"), states)
    assert "has 'merging-window-set': merging (session) windows are not imported" in str(e.value)


def test_reads_aggregating_window_contents_and_imports_them(tmp_path: Path) -> None:
    """tumbling_aggregate.py's windows in flight hold Collect's accumulator: the count and
    the items of the last window's records."""
    from sparkpoint.datastream.window import TimeWindow
    from tests.state_processor.flink_savepoints.tumbling_window_states import AGGREGATE_STATES

    source = fixture("tumbling_aggregate", "hashmap")
    state = read_pyflink_keyed_state(
        read_metadata_file(source), "windows", AGGREGATE_STATES["windows"], "test"
    )
    records, _ = expected_windows()
    expected = {
        key: {
            "window-contents": {
                w: (len(rs), tuple(f"{item}@{ts}" for _, item, ts in rs))
                for w, rs in states["window-contents"].items()
            }
        }
        for key, states in records.items()
    }
    assert state.values == expected
    target = import_flink_savepoint(source, str(tmp_path / "sp"), AGGREGATE_STATES)
    names = ("_window.contents", "_window.timers", "__sparkpoint_timers__")
    got = _imported(target, "windows", _sparkpoint_descriptors(*names))
    assert {k: s["_window.contents"] for k, s in got.items()} == {
        k: {TimeWindow(*w): acc for w, acc in s["window-contents"].items()}
        for k, s in expected.items()
    }


def test_cli_imports_windows_signed_with_the_key_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Window state pickles sparkpoint's TimeWindow, which a job unpickles only from a
    savepoint it trusts: ``--signing-key-file`` signs the import with the job's key."""
    from sparkpoint.checkpoint.metadata.file_format import signed_with
    from sparkpoint.cli.main import main

    key = tmp_path / "key"
    key.write_text("a-signing-key\n")
    key.chmod(0o600)
    target = str(tmp_path / "sp")
    spec = "tests.state_processor.flink_savepoints.tumbling_window_states:STATES"
    args = ["--signing-key-file", str(key), "savepoint", "import-flink"]
    code = main([*args, fixture("tumbling_window", "rocksdb"), target, "--states", spec])
    assert code == 0
    assert capsys.readouterr().out == f"Imported windows -> {target}\n"
    data = (Path(target) / "_metadata").read_bytes()
    assert signed_with(data, b"a-signing-key")
    assert not signed_with(data, b"another-key")
