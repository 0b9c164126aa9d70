"""The bounded version of ``scripts/fuzz_snapshots.py``: 40 mutations of a real savepoint
and heap checkpoint, each read through the restore of both backends, ``savepoint dump`` and
``SavepointReader``'s reading in worker processes under a time bound. Every case ends in a
named error or a result: no crash, no hang, no other exception. (The acceptance run, 5,000
mutations, is the script's default.)
"""

from __future__ import annotations

import json

import pytest

from scripts.fuzz_snapshots import READERS, main


def test_forty_mutations_end_in_named_errors_or_results(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--cases", "40", "--workers", "1", "--seed", "7", "--bound", "20"])
    out = capsys.readouterr().out.splitlines()
    summary = json.loads(out[-1])
    assert out[:-1] == []  # a line per case that crashed, hung or raised an unnamed error
    assert code == 0
    for reader in READERS:
        counts = summary["per_reader"][reader]
        assert set(counts) <= {"named", "result"}, (reader, counts)
        assert sum(counts.values()) == 40
    # the mutations reach the decoders: some read through, most are refused
    assert 0 < summary["results_and_errors"].get("same as the original", 0) < 40 * len(READERS)
