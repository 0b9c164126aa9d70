"""Issue 42's differential test of the second and third programs: a PyFlink job with pending
event-time timers (timer_buffer.py) or windows in flight (tumbling_window.py), stopped with
a savepoint on Flink, resumes on sparkpoint from the imported savepoint, and its second half
prints what PyFlink printed when it resumed from the same savepoint
(scripts/record_flink_savepoints.py).

Lines are compared as a multiset without the print sink's subtask prefix (the operators run
at parallelism 2, and Flink and sparkpoint place keys in different subtasks).

Window state holds sparkpoint's ``TimeWindow`` objects, pickles that name a class: the job
unpickles them only from a savepoint it trusts, so the windows are imported signed with the
key the job is given (``sparkpoint --signing-key-file ... savepoint import-flink`` and
``sparkpoint.snapshot.signing-key-file`` in a real deployment).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.state_processor.flink import import_flink_savepoint
from tests.differential.runner import run_program
from tests.state_processor.flink_savepoints.timer_buffer_states import STATES as BUFFER
from tests.state_processor.flink_savepoints.tumbling_window_states import STATES as WINDOWS
from tests.state_processor.test_flink_import import HERE, recorded

_PREFIX = re.compile(r"^\d+> ")


def _records(lines: list[str]) -> list[str]:
    return sorted(_PREFIX.sub("", line) for line in lines if " count=" in line)


def _sign_imports(monkeypatch: pytest.MonkeyPatch, **job_config: str) -> None:
    """Imports are signed (the process's default trust, as the CLI's --signing-key-file
    sets it; conftest puts it back) and the job is given the key and ``job_config`` (as
    ``sparkpoint run`` hands a job its configuration)."""
    from sparkpoint.checkpoint.trust import SnapshotTrust, use_by_default
    from sparkpoint.config.client import CLIENT_CONFIGURATION_ENV, encode_client_configuration

    key = "flink-import-differential-test"
    use_by_default(SnapshotTrust(signing_key=key.encode()))
    config = {"sparkpoint.snapshot.signing-key": key, **job_config}
    monkeypatch.setenv(CLIENT_CONFIGURATION_ENV, encode_client_configuration(config))


@pytest.fixture
def signed(monkeypatch: pytest.MonkeyPatch) -> None:
    _sign_imports(monkeypatch)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_resumes_pending_event_time_timers_as_pyflink_does(
    spark: Any, backend: str, tmp_path: Path
) -> None:
    source = str(HERE / "timer_buffer" / backend / "savepoint")
    target = import_flink_savepoint(source, str(tmp_path / "imported"), BUFFER)
    printed = run_program(HERE / "timer_buffer.py", ("second", target))
    expected = _records(recorded()["programs"][f"timer_buffer/{backend}"]["second_half"])
    # SECOND_HALF's eight records, and the flushes: the restored timers at 30000 of the
    # five keys and the second half's own at 40000 and 50000
    assert sum(" buffered " in line for line in expected) == 8
    assert any(line.startswith("alice count=") and " flush@30000 " in line for line in expected)
    assert _records(printed.splitlines()) == expected


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_resumes_windows_in_flight_as_pyflink_does(
    spark: Any, signed: None, backend: str, tmp_path: Path
) -> None:
    source = str(HERE / "tumbling_window" / backend / "savepoint")
    target = import_flink_savepoint(source, str(tmp_path / "imported"), WINDOWS)
    printed = run_program(HERE / "tumbling_window.py", ("second", target))
    expected = _records(recorded()["programs"][f"tumbling_window/{backend}"]["second_half"])
    # the restored windows [20000, 30000) of the five keys fire with the first half's records
    assert sum(" window=[20000,30000) " in line for line in expected) == 5
    assert _records(printed.splitlines()) == expected


def test_resumes_aggregating_windows_in_flight_as_pyflink_does(
    spark: Any, signed: None, tmp_path: Path
) -> None:
    from tests.state_processor.flink_savepoints.tumbling_window_states import AGGREGATE_STATES

    source = str(HERE / "tumbling_aggregate" / "hashmap" / "savepoint")
    target = import_flink_savepoint(source, str(tmp_path / "imported"), AGGREGATE_STATES)
    printed = run_program(HERE / "tumbling_aggregate.py", ("second", target))
    expected = _records(recorded()["programs"]["tumbling_aggregate/hashmap"]["second_half"])
    assert sum(" window=[20000,30000) " in line for line in expected) == 5
    assert _records(printed.splitlines()) == expected


def test_resumes_timers_and_windows_on_sparkpoints_rocksdb_backend(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same second halves with the sparkpoint job on RocksDB, which finds map entries
    by their bytes: the imported windows must be the bytes sparkpoint's own are."""
    _sign_imports(monkeypatch, **{"state.backend.type": "rocksdb"})
    for program, states, lines in (("timer_buffer", BUFFER, 20), ("tumbling_window", WINDOWS, 12)):
        source = str(HERE / program / "rocksdb" / "savepoint")
        target = import_flink_savepoint(source, str(tmp_path / program), states)
        printed = run_program(HERE / f"{program}.py", ("second", target))
        expected = _records(recorded()["programs"][f"{program}/rocksdb"]["second_half"])
        assert len(expected) == lines
        assert _records(printed.splitlines()) == expected
