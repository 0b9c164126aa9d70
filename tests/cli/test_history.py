"""``sparkpoint checkpoints history``: statistics stored in ``_metadata`` by the coordinator,
read back from storage equal to the live ones; older ``_metadata`` files without them still
load (sizes measured from their handles). No Spark: the coordinator runs with a fake clock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkpoint.checkpoint.metadata.file_format import load_checkpoint
from sparkpoint.checkpoint.stats import STATS_MASTER_STATE, stats_from_metadata
from sparkpoint.cli.main import main
from tests.cli.test_cli import JOB as OLD_JOB
from tests.cli.test_cli import LARGE as OLD_LARGE
from tests.cli.test_cli import SMALL as OLD_SMALL
from tests.cli.test_cli import storage_access, write_checkpoint
from tests.runtime.test_coordinator import LARGE, MASTER, SMALL, Harness, keyed_operator


def history_json(capsys: pytest.CaptureFixture[str], directory: Path) -> list[dict]:  # type: ignore[type-arg]
    code = main(["checkpoints", "history", str(directory), "--json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return json.loads(out)  # type: ignore[no-any-return]


def test_history_equals_the_live_statistics(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    h = Harness(tmp_path, num_retained=2)
    for epoch, (payloads, ms) in enumerate(
        [([SMALL, LARGE], 120), ([LARGE, LARGE, SMALL], 340), ([SMALL], 75)], start=3
    ):
        h.clock.advance(1000)
        pending = h.coordinator.trigger(epoch)
        h.clock.advance(ms)
        h.coordinator.complete(pending, keyed_operator(pending.location, payloads), MASTER)
    in_progress = h.coordinator.trigger(9)  # chk-4: no _metadata yet
    rows = history_json(capsys, h.root)
    # two retained (num_retained=2): checkpoints 2 and 3
    assert [r["id"] for r in rows] == [2, 3]
    live = {s.checkpoint_id: s.to_json() for s in h.coordinator.stats}
    for row in rows:
        expected = dict(live[row["id"]])
        del expected["status"], expected["failure"]
        del expected["external_pointer"]  # the pointer as given: here a path, live a URI
        assert {
            k: v for k, v in row.items() if k not in ("path", "metadata_size", "external_pointer")
        } == expected
        assert row["path"] == str(h.chk(row["id"]))
        assert row["metadata_size"] == (h.chk(row["id"]) / "_metadata").stat().st_size
    two, three = rows
    assert (two["epoch"], two["duration_ms"], two["files"]) == (4, 340, 2)
    assert two["inline_bytes"] == len(SMALL)
    assert two["state_size"] == two["checkpointed_size"] == 2 * len(LARGE) + len(SMALL)
    assert [
        (s["operator_id"], s["subtask"], s["state_size"], s["inline_bytes"], s["files"])
        for s in two["subtasks"]
    ] == [
        ("keyed-op", 0, len(LARGE), 0, 1),
        ("keyed-op", 1, len(LARGE), 0, 1),
        ("keyed-op", 2, len(SMALL), len(SMALL), 0),
    ]
    assert (three["duration_ms"], three["trigger_timestamp_ms"]) == (75, 3000 + 120 + 340)
    assert in_progress.checkpoint_id == 4

    code = main(["checkpoints", "history", str(h.job_dir)])
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split()[:5] == ["ID", "KIND", "EPOCH", "TRIGGERED", "(UTC)"]
    assert lines[1].split()[:3] == ["2", "checkpoint", "4"]
    assert "340 ms" in lines[1] and "keyed-op: 29.3 KiB / 29.3 KiB / 100 B" in lines[1]
    assert lines[-1] == (
        "2 retained checkpoint(s); 1 directory(ies) without a _metadata (in progress?)"
    )


def test_a_savepoint_keeps_its_statistics(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    h = Harness(tmp_path)
    h.clock.advance(500)
    sp = h.coordinator.trigger(2, str(tmp_path / "savepoints"), is_savepoint=True)
    h.clock.advance(40)
    h.coordinator.complete(sp, keyed_operator(sp.location, [SMALL, SMALL]), MASTER)
    [row] = history_json(capsys, tmp_path / "savepoints")
    assert (row["id"], row["savepoint"], row["duration_ms"], row["inline_bytes"]) == (
        1,
        True,
        40,
        2 * len(SMALL),
    )


def test_metadata_without_statistics_still_loads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A ``_metadata`` written before statistics were stored: sizes from its handles."""
    access = storage_access(tmp_path / "old")
    chk = write_checkpoint(access, 1)
    metadata, _ = load_checkpoint(access, str(chk))
    assert metadata.get_master_state(STATS_MASTER_STATE) is None
    assert stats_from_metadata(metadata).duration_ms == -1
    [row] = history_json(capsys, tmp_path / "old" / OLD_JOB)
    assert (row["id"], row["trigger_timestamp_ms"], row["duration_ms"]) == (1, -1, -1)
    assert (row["state_size"], row["inline_bytes"], row["files"]) == (
        len(OLD_SMALL) + len(OLD_LARGE),
        len(OLD_SMALL),
        1,
    )
    assert [(s["subtask"], s["state_size"]) for s in row["subtasks"]] == [
        (0, len(OLD_SMALL)),
        (1, len(OLD_LARGE)),
    ]
    code = main(["checkpoints", "history", str(tmp_path / "old")])
    out, _ = capsys.readouterr()
    assert code == 0 and out.splitlines()[1].split()[:5] == ["1", "checkpoint", "-", "-", "-"]


def test_history_of_a_missing_directory_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["checkpoints", "history", str(tmp_path / "nope")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err
