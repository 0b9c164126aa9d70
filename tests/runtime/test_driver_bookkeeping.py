"""Driver bookkeeping without Spark: sink commits, the job master state, fault hooks."""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.reports import EpochStart
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.protocol import SinkOutput
from sparkpoint.testing import Faults


class RecordingSink:
    transactional = True

    def __init__(self) -> None:
        self.committed: list[Any] = []
        self.aborted: list[Any] = []

    def commit(self, committables: list[Any]) -> None:
        self.committed.extend(committables)

    def abort(self, committables: list[Any]) -> None:
        self.aborted.extend(committables)


def test_sink_output_waits_for_its_epoch_commit_and_collect_output_is_immediate() -> None:
    files, printed = RecordingSink(), RecordingSink()
    commits = SinkCommits({"files": files, "print": printed})
    commits.absorb(1, [SinkOutput("files", 0, ("a",), True), SinkOutput("print", 0, ("p",), False)])
    commits.absorb(2, [SinkOutput("files", 1, ("b",), True)])
    assert printed.committed == ["p"] and files.committed == []
    assert commits.pending_up_to(1) == [("files", ["a"])]
    commits.commit_up_to(1)
    assert files.committed == ["a"]
    commits.discard([SinkOutput("files", 0, ("c",), True), SinkOutput("print", 0, ("q",), False)])
    assert files.aborted == ["c"] and printed.aborted == []
    commits.abort_all()
    assert files.aborted == ["c", "b"] and commits.pending_up_to(10) == []
    commits.recommit([("files", [["d", 1]]), ("gone", ["x"])])
    assert files.committed == ["a", ("d", 1)]


class SweepingSink(RecordingSink):
    """Records the ``keep`` of every lingering sweep; its aborts fail while ``down``."""

    def __init__(self) -> None:
        super().__init__()
        self.sweeps: list[list[Any]] = []
        self.down = False

    def abort(self, committables: list[Any]) -> None:
        if self.down:
            raise ConnectionError("broker down")
        super().abort(committables)

    def abort_lingering(self, keep: list[Any]) -> list[str]:
        self.sweeps.append(list(keep))
        return []


def test_lingering_sweeps_keep_the_pending_and_a_failed_abort_is_retried() -> None:
    """After each commit and restore the sink sweeps what it staged, keeping what is still
    pending; an abort that fails leaves its committables pending for the retry."""
    sink = SweepingSink()
    commits = SinkCommits({"kafka": sink})
    commits.absorb(1, [SinkOutput("kafka", 0, ("a",), True)])
    commits.absorb(2, [SinkOutput("kafka", 0, ("b",), True)])
    commits.commit_up_to(1)
    assert sink.committed == ["a"] and sink.sweeps == [["b"]]
    sink.down = True
    with pytest.raises(ConnectionError):
        commits.abort_all()
    assert commits.pending_up_to(10) == [("kafka", ["b"])]  # still there for the retry
    sink.down = False
    commits.abort_all()
    assert sink.aborted == ["b"] and sink.sweeps == [["b"]]  # no sweep before the restore
    commits.recommit([("kafka", ["a"])])
    assert sink.committed == ["a", "a"] and sink.sweeps == [["b"], []]


def test_job_master_state_round_trips_through_metadata() -> None:
    state = JobMasterState(
        "job", "name", 7, {"src": {"a": 1}}, {"w@0": 5}, {"ts": 9}, (("files", ["x"]),)
    )
    metadata = CheckpointMetadata(3, (), (state.to_master_state(),))
    assert JobMasterState.from_metadata(metadata) == state
    assert JobMasterState.from_metadata(CheckpointMetadata(3)) is None
    assert JobMasterState.from_metadata(None) is None


def test_faults_call_driver_and_task_callbacks() -> None:
    seen: list[Any] = []
    faults = Faults().on_epoch_start(lambda e: seen.append(("epoch", e.epoch)))
    assert faults.task_hooks() is None
    faults.on_local_commit(lambda op, sub, epoch: seen.append((op, sub, epoch)))
    faults.before_epoch(EpochStart("job", 4, 5))
    hooks = faults.task_hooks()
    assert hooks is not None
    hooks.after_local_commit("count", 1, 4)
    assert seen == [("epoch", 4), ("count", 1, 4)]
    assert [e.epoch for e in faults.epochs_seen] == [4]


def test_each_commit_names_the_newest_epoch_it_published_and_the_latency_follows() -> None:
    """``sparkpoint.lastCommitLatency``: from the start of the newest epoch a commit
    published to the commit; epochs without staged output are not named."""
    import time
    from types import SimpleNamespace

    from sparkpoint.runtime.driver.progress import JobProgress

    settings = SimpleNamespace(job_id="j", job_name="j", policy=None)
    progress = JobProgress(settings, None, None, None)  # type: ignore[arg-type]
    named: list[int] = []

    def committed(epoch: int) -> None:
        named.append(epoch)
        progress.sink_committed(epoch)

    commits = SinkCommits({"files": RecordingSink()}, committed=committed)
    for epoch in (1, 2, 3):
        progress.epoch_started(epoch)
    commits.absorb(1, [SinkOutput("files", 0, ("a",), True)])
    commits.absorb(2, [SinkOutput("files", 0, ("b",), True)])
    assert progress.commit_latency_ms is None
    time.sleep(0.05)
    commits.commit_up_to(3)  # epoch 3 staged nothing: the commit published epoch 2's
    assert named == [2]
    latency = progress.commit_latency_ms
    assert latency is not None and 50 <= latency < 5000
    commits.commit_up_to(4)  # nothing staged: no commit named
    assert named == [2] and progress.commit_latency_ms == latency
