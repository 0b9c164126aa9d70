"""The driver's side of background materializations (``ChangelogCheckpoints``): when one
starts, what the tasks are told, when it is adopted or abandoned, and that an abandoned
one's files are deleted. Real files; the Spark jobs are in test_changelog_checkpoints.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsStateHandle,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.runtime.driver.changelog_checkpoints import (
    ChangelogCheckpoints,
    MaterializationFailuresExceeded,
)
from sparkpoint.runtime.protocol import UploadState, UploadStatus

KEYED = {("count", 0), ("count", 1)}
INTERVAL_MS = 1000


def _changelog() -> ChangelogCheckpoints:
    node = SimpleNamespace(operator_id="count")
    stage = SimpleNamespace(keyed_nodes=[node], max_parallelism=128, parallelism=2)
    changelog = ChangelogCheckpoints(
        SimpleNamespace(stages=[stage]),
        True,
        INTERVAL_MS,
        "heap",  # type: ignore[arg-type]
    )
    # as after a first checkpoint that materialized at epoch 1, at time 0
    changelog.materialization_id = 1
    changelog.materialization_epoch = 1
    return changelog


def _handle(tmp_path: Path, name: str) -> KeyGroupsStateHandle:
    path = tmp_path / name
    path.write_bytes(b"state" * 10)
    return KeyGroupsStateHandle(
        KeyGroupRangeOffsets(KeyGroupRange.of(0, 0), (0,)), FileStateHandle(str(path), 50)
    )


def _status(sub: int, mid: int, state: str, handle: Any = None) -> UploadStatus:
    return UploadStatus("count", sub, mid, state, handle, 50 if handle else 0, "boom")


def test_starts_after_the_interval_and_only_one_at_a_time() -> None:
    changelog = _changelog()
    assert not changelog.should_materialize(10, False, background=True)
    assert not changelog.start_background(5, INTERVAL_MS - 1)
    assert changelog.start_background(6, INTERVAL_MS)
    assert changelog.pending_materializations() == frozenset({6})
    changelog.run_accepted(7, KEYED, 6)
    # the interval passed, but one is uploading: checkpoints compose, none materializes
    assert not changelog.should_materialize(5 * INTERVAL_MS, False, background=True)
    assert not changelog.start_background(7, 5 * INTERVAL_MS)
    # without background uploads the interval makes the checkpoint materialize itself
    assert changelog.should_materialize(5 * INTERVAL_MS, False, background=False)


def test_adopted_once_every_upload_is_done(tmp_path: Path) -> None:
    changelog = _changelog()
    assert changelog.start_background(6, INTERVAL_MS)
    changelog.run_accepted(7, KEYED, 6)
    h0, h1 = _handle(tmp_path, "a"), _handle(tmp_path, "b")
    changelog.advance(
        [_status(0, 6, UploadState.DONE, h0), _status(1, 6, UploadState.RUNNING)],
        INTERVAL_MS + 10,
    )
    assert changelog.materialization_id == 1  # not yet: subtask 1 still uploads
    changelog.advance([_status(1, 6, UploadState.DONE, h1)], INTERVAL_MS + 20)
    assert (changelog.materialization_id, changelog.materialization_epoch) == (6, 7)
    assert changelog.pending_materializations() == frozenset()
    [stats] = changelog.adopted
    assert (stats.materialization_id, stats.epoch, stats.uploaded_bytes) == (6, 7, 100)
    # the next one waits a whole interval from the adoption
    assert not changelog.start_background(9, 2 * INTERVAL_MS)
    assert changelog.start_background(9, 2 * INTERVAL_MS + 20)
    # a failover drops the adopted one no completed checkpoint referenced: files deleted
    changelog.reset()
    changelog.close()
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert 9 in changelog.aborted and changelog.materialization_id is None


def test_a_failed_upload_abandons_it_and_deletes_what_the_others_wrote(tmp_path: Path) -> None:
    changelog = _changelog()
    assert changelog.start_background(6, INTERVAL_MS)
    changelog.run_accepted(7, KEYED, 6)
    done = _handle(tmp_path, "done")
    changelog.advance(
        [_status(0, 6, UploadState.DONE, done), _status(1, 6, UploadState.FAILED)], 3000
    )
    changelog.close()  # waits for the deletions
    assert list(changelog.aborted) == [6]
    assert not (tmp_path / "done").exists()
    assert changelog.materialization_id == 1 and changelog.adopted == []
    assert changelog.pending_materializations() == frozenset()


def test_lost_records_and_runs_not_accepted_abandon_it() -> None:
    changelog = _changelog()
    assert changelog.start_background(6, INTERVAL_MS)
    changelog.run_accepted(7, KEYED, 6)
    changelog.advance([_status(0, 6, UploadState.RUNNING)], INTERVAL_MS)  # 1: no record
    assert list(changelog.aborted) == [6]
    # the next attempt comes an interval after the failure
    assert not changelog.start_background(8, 2 * INTERVAL_MS - 1)
    assert changelog.start_background(8, 2 * INTERVAL_MS)
    # its run was discarded and the epoch ran again with checkpoint 9
    assert changelog.start_background(9, 2 * INTERVAL_MS)
    assert list(changelog.aborted) == [6, 8]
    changelog.run_accepted(9, {("count", 0)}, 9)  # one subtask kept no changelog
    assert list(changelog.aborted) == [6, 8, 9]
    assert changelog.pending_materializations() == frozenset()
    changelog.close()


def test_one_older_than_a_materialization_completed_since_is_abandoned(
    tmp_path: Path,
) -> None:
    changelog = _changelog()
    assert changelog.start_background(6, INTERVAL_MS)
    changelog.run_accepted(7, KEYED, 6)
    changelog.materialization_id, changelog.materialization_epoch = 8, 9  # a failover's
    changelog.advance(
        [_status(s, 6, UploadState.DONE, _handle(tmp_path, f"h{s}")) for s in (0, 1)],
        2 * INTERVAL_MS,
    )
    changelog.close()
    assert changelog.materialization_id == 8 and list(changelog.aborted) == [6]
    assert not any(tmp_path.iterdir())


def _fail_one(changelog: ChangelogCheckpoints, mid: int, now_ms: int) -> None:
    assert changelog.start_background(mid, now_ms)
    changelog.run_accepted(mid + 1, KEYED, mid)
    changelog.advance([_status(0, mid, UploadState.FAILED)], now_ms)


def test_failures_in_a_row_beyond_the_allowed_fail_the_job_over(tmp_path: Path) -> None:
    changelog = _changelog()
    _fail_one(changelog, 6, INTERVAL_MS)
    # an adopted one starts the count again
    assert changelog.start_background(8, 2 * INTERVAL_MS)
    changelog.run_accepted(9, KEYED, 8)
    changelog.advance(
        [_status(s, 8, UploadState.DONE, _handle(tmp_path, f"h{s}")) for s in (0, 1)],
        2 * INTERVAL_MS,
    )
    assert changelog.materialization_id == 8
    _fail_one(changelog, 10, 3 * INTERVAL_MS)
    _fail_one(changelog, 12, 4 * INTERVAL_MS)
    with pytest.raises(MaterializationFailuresExceeded) as info:
        _fail_one(changelog, 14, 5 * INTERVAL_MS)
    message = str(info.value)
    assert "periodic materializations failed in a row: 3 " in message
    assert "state.backend.changelog.max-failures-allowed = 3" in message
    assert "materialization 14: the upload of count#0 ended: boom" in message
    # the failover that follows starts the count again
    changelog.reset()
    changelog.materialization_id, changelog.materialization_epoch = 16, 17
    _fail_one(changelog, 18, 10 * INTERVAL_MS)
    changelog.close()


def test_no_periodic_materialization_when_it_is_off() -> None:
    node = SimpleNamespace(operator_id="count")
    stage = SimpleNamespace(keyed_nodes=[node], max_parallelism=128, parallelism=2)
    changelog = ChangelogCheckpoints(
        SimpleNamespace(stages=[stage]),
        True,
        None,
        "heap",  # type: ignore[arg-type]
    )
    assert changelog.should_materialize(0, False)  # no materialization yet
    changelog.materialization_id = 1
    assert not changelog.should_materialize(10**9, False, background=False)
    assert not changelog.start_background(2, 10**9)
    changelog.close()


def test_an_adopted_one_no_checkpoint_referenced_goes_when_the_next_is_adopted(
    tmp_path: Path,
) -> None:
    changelog = _changelog()
    for mid, now in ((6, INTERVAL_MS), (8, 3 * INTERVAL_MS)):
        assert changelog.start_background(mid, now)
        changelog.run_accepted(mid + 1, KEYED, mid)
        changelog.advance(
            [_status(s, mid, UploadState.DONE, _handle(tmp_path, f"{mid}-{s}")) for s in (0, 1)],
            now,
        )
    assert changelog.materialization_id == 8
    changelog.close()  # waits for the deletions
    # 6's files went when 8 was adopted (close deletes only the unreferenced 8's)
    assert list(tmp_path.iterdir()) == []
