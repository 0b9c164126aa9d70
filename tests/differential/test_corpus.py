"""The differential corpus: each program prints on sparkpoint what it printed on PyFlink.

Goldens are recorded with real PyFlink by ``scripts/record_pyflink_goldens.py``; these tests
need no PyFlink. Programs marked ``pending`` in ``manifest.toml`` use features sparkpoint
does not have yet: they are not collected as tests at all (neither run nor skipped).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from tests.differential import runner

ENTRIES = runner.load_manifest()
ACTIVE = [e for e in ENTRIES if e.pending is None]


def test_every_program_has_a_manifest_entry_and_a_fresh_golden() -> None:
    on_disk = {
        f"{section}/{p.stem}"
        for section, folder in runner.SECTIONS.items()
        for p in folder.glob("*.py")
    }
    in_manifest = {e.id for e in ENTRIES}
    assert on_disk == in_manifest, (
        f"without manifest entry: {sorted(on_disk - in_manifest)}; "
        f"without program: {sorted(in_manifest - on_disk)}"
    )
    recorded = json.loads((runner.GOLDENS / "recorded.json").read_text())
    assert recorded["pyflink_version"].startswith("2.")
    for e in ENTRIES:
        assert e.golden.exists(), f"{e.id}: no golden; run scripts/record_pyflink_goldens.py"
        digest = hashlib.sha256(e.path.read_bytes()).hexdigest()
        assert recorded["programs"][e.id]["sha256"] == digest, (
            f"{e.id} changed since its golden was recorded; re-record it"
        )


def test_corpus_size_per_issue() -> None:
    per_issue = {issue: sum(e.issue == issue for e in ENTRIES) for issue in ("11", "12")}
    assert per_issue["11"] >= 28 and per_issue["12"] >= 22, per_issue
    assert sum(e.issue == "examples" for e in ENTRIES) == 10
    # issue 31: a program for every metric kind (counter, gauge, meter, distribution)
    assert sorted(e.name[:3] for e in ENTRIES if e.issue == "31") == ["m01", "m02", "m03", "m04"]


def test_prefix_normalisation_and_comparison_modes() -> None:
    text = "id:2> a\n2> b\nid> c\n1 -> 1\nplain\n"
    assert runner.normalise(text, True) == ["id> a", "b", "id> c", "1 -> 1", "plain"]
    assert runner.normalise(text, False) == text.splitlines()
    assert runner.normalise(text, False, ("^plain$", "->")) == ["id:2> a", "2> b", "id> c"]
    assert runner.differences(["a", "b"], ["b", "a"], "unordered") == []
    assert runner.differences(["a", "b"], ["b", "a"], "exact") != []
    assert runner.differences(["x> 1", "y> 2", "x> 3"], ["y> 2", "x> 1", "x> 3"], "per_sink") == []
    assert runner.differences(["x> 1", "x> 3"], ["x> 3", "x> 1"], "per_sink") != []
    assert runner.differences(["a", "a"], ["a"], "unordered") == ["- a"]
    source = "from pyflink.common import Types\nimport pyflink\nx = 'pyflink'\n"
    assert runner.rewrite_imports(source) == (
        "from sparkpoint.common import Types\nimport sparkpoint\nx = 'pyflink'\n"
    )


@pytest.mark.spark
@pytest.mark.parametrize("entry", ACTIVE, ids=[e.id for e in ACTIVE])
def test_program_prints_what_pyflink_prints(entry: runner.Entry, spark: Any) -> None:
    expected = runner.normalise(entry.golden.read_text(), entry.strip_prefix, entry.ignore_lines)
    output = runner.run_program(entry.path, entry.args)
    actual = runner.normalise(output, entry.strip_prefix, entry.ignore_lines)
    problems = runner.differences(expected, actual, entry.order)
    assert not problems, f"{entry.id} ({entry.order}):\n" + "\n".join(problems)
