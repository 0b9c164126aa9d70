"""Issue 42's differential test: a PyFlink job stopped with a savepoint on Flink resumes on
sparkpoint from the imported savepoint, and its second half prints what PyFlink printed
when it resumed from the same savepoint (recorded by scripts/record_flink_savepoints.py).

Lines are compared as a multiset without the print sink's subtask prefix: the counter runs
at parallelism 2, and Flink and sparkpoint place keys in different subtasks (Flink hashes
the pickled key, sparkpoint its value); per key the order is each key's record order.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.state_processor.flink import import_flink_savepoint
from tests.differential.runner import run_program
from tests.state_processor.flink_savepoints.keyed_counts_states import STATES
from tests.state_processor.test_flink_import import BACKENDS, HERE, recorded, savepoint

_PREFIX = re.compile(r"^\d+> ")


def _records(lines: list[str]) -> list[str]:
    return sorted(_PREFIX.sub("", line) for line in lines if " count=" in line)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resumes_a_pyflink_savepoint_as_pyflink_does(
    spark: Any, backend: str, tmp_path: Path
) -> None:
    target = import_flink_savepoint(savepoint(backend), str(tmp_path / "imported"), STATES)
    mode = ("thread",) if backend.endswith("+thread") else ()  # as PyFlink resumed it
    printed = run_program(HERE / "keyed_counts.py", ("second", target, *mode))
    expected = _records(recorded()["programs"][f"keyed_counts/{backend}"]["second_half"])
    assert len(expected) == 10  # SECOND_HALF's ten records, each printed once
    assert _records(printed.splitlines()) == expected


def test_resumes_list_reducing_aggregating_state_under_a_typed_key(
    spark: Any, tmp_path: Path
) -> None:
    from tests.state_processor.flink_savepoints.keyed_lists_states import KEY_TYPES
    from tests.state_processor.flink_savepoints.keyed_lists_states import STATES as LISTS

    source = str(HERE / "keyed_lists" / "hashmap" / "savepoint")
    target = import_flink_savepoint(source, str(tmp_path / "imported"), LISTS, key_types=KEY_TYPES)
    printed = run_program(HERE / "keyed_lists.py", ("second", target))
    expected = _records(recorded()["programs"]["keyed_lists/hashmap"]["second_half"])
    assert len(expected) == 10
    assert _records(printed.splitlines()) == expected
