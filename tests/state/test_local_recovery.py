"""The local-state decision table (pure: no Spark, no backend)."""

from __future__ import annotations

import pytest

from sparkpoint.state.local_recovery import (
    LocalCommitMarker,
    LocalStateAction,
    decide_local_state,
)

JOB = "job-a"


def _decide(local_epoch, marker, *, can_restore=False, may_undo=True, prev_run=7):  # type: ignore[no-untyped-def]
    return decide_local_state(
        local_epoch,
        marker,
        job_id=JOB,
        incarnation=2,
        epoch=10,
        prev_run=prev_run,
        can_restore=can_restore,
        may_undo=may_undo,
    )


def test_state_of_the_previous_epoch_by_the_accepted_run_is_used() -> None:
    assert _decide(9, LocalCommitMarker(JOB, 2, 7)) is LocalStateAction.USE


def test_a_commit_of_this_epoch_is_undone_once() -> None:
    marker = LocalCommitMarker(JOB, 2, 8)
    assert _decide(10, marker) is LocalStateAction.UNDO_LAST_COMMIT
    assert _decide(10, marker, may_undo=False) is LocalStateAction.LOST
    assert _decide(10, marker, may_undo=False, can_restore=True) is LocalStateAction.RESTORE


@pytest.mark.parametrize(
    ("local_epoch", "marker"),
    [
        (None, None),  # nothing on disk
        (9, None),  # no marker of ours
        (9, LocalCommitMarker("other-job", 2, 7)),
        (9, LocalCommitMarker(JOB, 1, 7)),  # an older incarnation
        (9, LocalCommitMarker(JOB, 2, 6)),  # committed by a discarded run of epoch 9
        (8, LocalCommitMarker(JOB, 2, 7)),  # an older epoch (the subtask ran elsewhere)
        (11, LocalCommitMarker(JOB, 2, 9)),  # from the future: never trusted
    ],
)
def test_anything_else_is_restored_or_lost(local_epoch, marker) -> None:  # type: ignore[no-untyped-def]
    assert _decide(local_epoch, marker) is LocalStateAction.LOST
    assert _decide(local_epoch, marker, can_restore=True) is LocalStateAction.RESTORE


def test_first_epoch_has_no_previous_run() -> None:
    marker = LocalCommitMarker(JOB, 2, None)
    assert _decide(9, marker, prev_run=None) is LocalStateAction.USE
    assert _decide(9, marker, prev_run=3) is LocalStateAction.LOST


def test_marker_round_trip_and_foreign_bytes() -> None:
    marker = LocalCommitMarker(JOB, 3, 12, (5, None))
    assert LocalCommitMarker.from_bytes(marker.to_bytes()) == marker
    assert LocalCommitMarker.from_bytes(b"") is None
    assert LocalCommitMarker.from_bytes(b"not json") is None
    assert LocalCommitMarker.from_bytes(b'{"job": "x"}') is None
