"""End-to-end record latency on the driver, without Spark: source tasks' record times wait
for the commit covering their epoch (or the epoch's end without a transactional sink) and
become the ``sparkpoint.lastCommitRecordLatency*`` gauges; ``currentEmitEventTimeLag``
per source subtask."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from sparkpoint.metrics.record_times import RecordTimes, SourceRecordTimes, wall_clock_ms
from sparkpoint.runtime.driver.metric_values import metrics_by_identifier
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.record_latency import PublishedLatency, RecordLatency
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.protocol import ExecutorIdentity, SinkOutput, TaskReport


class _Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _read(op: str, count: int, lo: int, hi: int, total: int, lag: int | None = None) -> Any:
    return SourceRecordTimes(op, RecordTimes(count, lo, hi, total), lag)


def test_records_count_until_the_commit_covering_their_epoch() -> None:
    clock = _Clock(0)
    latency = RecordLatency(at_commit=True, clock_ms=clock)
    # Two source tasks read epoch 1; one read epoch 2.
    latency.epoch_accepted(
        1, [(0, _read("src", 2, 1_000, 3_000, 4_000)), (1, _read("src", 1, 2_000, 2_000, 2_000))]
    )
    latency.epoch_accepted(2, [(0, _read("src", 1, 8_000, 8_000, 8_000))])
    assert latency.latest is None  # nothing committed yet
    clock.now = 10_000
    latency.published(1)
    # Epoch 1's three records: timestamps 1000, 3000 and 2000 (mean 2000).
    assert latency.latest == PublishedLatency(9_000, 8_000, 7_000, 3, 0)
    clock.now = 10_500
    latency.published(2)
    assert latency.latest == PublishedLatency(2_500, 2_500, 2_500, 1, 0)
    clock.now = 11_000
    latency.published(3)  # a commit covering no records leaves the figures
    assert latency.latest == PublishedLatency(2_500, 2_500, 2_500, 1, 0)


def test_a_commit_before_its_epochs_record_times_counts_them_from_the_commit() -> None:
    # The job master completes a checkpoint (and commits) while it accepts the checkpoint's
    # own epoch, before that epoch's record times reach the bookkeeping.
    clock = _Clock(10_000)
    latency = RecordLatency(at_commit=True, clock_ms=clock)
    latency.published(1)
    clock.now = 10_004
    latency.epoch_accepted(1, [(0, _read("src", 2, 9_000, 9_600, 18_600))])
    assert latency.latest == PublishedLatency(1_000, 700, 400, 2, 0)
    latency.epoch_accepted(2, [(0, _read("src", 1, 9_900, 9_900, 9_900))])
    assert latency.latest == PublishedLatency(1_000, 700, 400, 2, 0)  # epoch 2: no commit yet
    clock.now = 11_000
    latency.published(2)
    assert latency.latest == PublishedLatency(1_100, 1_100, 1_100, 1, 0)


def test_a_late_epoch_joins_the_records_its_commit_covered() -> None:
    # Epochs between checkpoints: the commit at epoch 3's checkpoint covers epochs 2 and 3,
    # and comes before epoch 3's record times.
    clock = _Clock(10_000)
    latency = RecordLatency(at_commit=True, clock_ms=clock)
    latency.epoch_accepted(2, [(0, _read("src", 1, 9_000, 9_000, 9_000))])
    latency.published(3)
    assert latency.latest == PublishedLatency(1_000, 1_000, 1_000, 1, 0)
    clock.now = 10_003
    latency.epoch_accepted(3, [(0, _read("src", 1, 9_800, 9_800, 9_800))])
    assert latency.latest == PublishedLatency(1_000, 600, 200, 2, 0)


def test_one_commit_covering_several_epochs_counts_all_their_records() -> None:
    clock = _Clock(0)
    latency = RecordLatency(at_commit=True, clock_ms=clock)
    for epoch, ts in ((1, 1_000), (2, 2_000), (3, 9_000)):
        latency.epoch_accepted(epoch, [(0, _read("src", 1, ts, ts, ts))])
    clock.now = 10_000
    latency.published(2)
    assert latency.latest == PublishedLatency(9_000, 8_500, 8_000, 2, 0)
    latency.published(3)
    assert latency.latest == PublishedLatency(1_000, 1_000, 1_000, 1, 0)


def test_without_a_transactional_sink_an_epoch_publishes_when_it_ends() -> None:
    clock = _Clock(5_000)
    latency = RecordLatency(at_commit=False, clock_ms=clock)
    times = SourceRecordTimes("seq", RecordTimes(4, 4_900, 4_990, 4 * 4_950, 4), None)
    latency.epoch_accepted(1, [(0, times)])
    assert latency.latest == PublishedLatency(100, 50, 10, 4, 4)


def test_a_rollback_drops_the_epochs_never_published() -> None:
    clock = _Clock(10_000)
    latency = RecordLatency(at_commit=True, clock_ms=clock)
    latency.epoch_accepted(1, [(0, _read("src", 1, 1_000, 1_000, 1_000))])
    latency.discard_pending()
    latency.epoch_accepted(2, [(0, _read("src", 1, 9_000, 9_000, 9_000))])
    latency.published(2)
    assert latency.latest == PublishedLatency(1_000, 1_000, 1_000, 1, 0)


def test_emit_lag_per_source_subtask_keeps_its_latest_value() -> None:
    latency = RecordLatency(at_commit=True, clock_ms=_Clock(0))
    latency.epoch_accepted(
        1,
        [
            (0, _read("kafka", 1, 1, 1, 1, lag=250)),
            (1, _read("kafka", 1, 1, 1, 1, lag=40)),
            (0, SourceRecordTimes("seq", RecordTimes(1, 1, 1, 1, 1), None)),
        ],
    )
    assert latency.emit_lags() == {"kafka": {0: 250, 1: 40}, "seq": {0: -1}}
    # Subtask 1 read nothing with a timestamp in epoch 2: its lag stays as it was.
    latency.epoch_accepted(
        2, [(0, _read("kafka", 1, 1, 1, 1, lag=300)), (1, SourceRecordTimes("kafka", None))]
    )
    assert latency.emit_lags() == {"kafka": {0: 300, 1: 40}, "seq": {0: -1}}


def test_sink_commits_tell_the_epoch_each_commit_covered_and_whether_any_sink_waits() -> None:
    class Sink:
        def __init__(self, transactional: bool) -> None:
            self.transactional = transactional

        def commit(self, committables: Any) -> None:
            pass

    covered: list[int] = []
    commits = SinkCommits({"files": Sink(True), "print": Sink(False)}, covered=covered.append)
    assert commits.transactional
    assert not SinkCommits({"print": Sink(False)}).transactional
    commits.absorb(1, [SinkOutput("files", 0, ("a",), True)])
    commits.commit_up_to(2)  # epoch 2 staged nothing: the commit still covers it
    commits.commit_up_to(3)
    assert covered == [2, 3]


def _report(stage: int, subtask: int, times: SourceRecordTimes | None) -> TaskReport:
    return TaskReport(
        stage, subtask, 0, ExecutorIdentity("0", "h", 1), records_in=1, record_times=times
    )


def test_job_metrics_show_the_latency_of_the_committed_records() -> None:
    """Through the job's progress as the job master drives it: a record stamped 5 s ago,
    committed now, has a latency of at least 5 s; -1 before the first commit."""
    settings = SimpleNamespace(job_id="j", job_name="job", policy=None)
    checkpoints = SimpleNamespace(statistics=list)
    progress = JobProgress(settings, checkpoints, None, None, commits_on_checkpoint=True)  # type: ignore[arg-type]
    commits = SinkCommits({}, covered=progress.records_published)
    names = [
        "sparkpoint.lastCommitRecordLatencyMax",
        "sparkpoint.lastCommitRecordLatencyMean",
        "sparkpoint.lastCommitRecordLatencyMin",
    ]
    assert [metrics_by_identifier(progress)[f"job.{n}"] for n in names] == [-1, -1, -1]

    now = wall_clock_ms()
    old, new = now - 5_000, now - 1_000
    source = SourceRecordTimes("src", RecordTimes(2, old, new, old + new), now - new)
    reports = [_report(0, 0, source), _report(1, 0, None)]
    progress.epoch_finished(
        1, reports, [], 0, frozenset({0}), runs=1, seconds=0.1, checkpoint_id=1, uploads=(0, 0)
    )
    assert metrics_by_identifier(progress)["job.sparkpoint.lastCommitRecordLatencyMax"] == -1
    time.sleep(0.01)
    commits.commit_up_to(1)
    done = wall_clock_ms()
    values = metrics_by_identifier(progress)
    oldest, mean, newest = (values[f"job.{n}"] for n in names)
    assert 5_010 <= oldest <= done - old
    assert 3_010 <= mean <= done - (old + new) // 2 + 1
    assert 1_010 <= newest <= done - new
    assert oldest - newest == 4_000
    assert values["job.src.0.currentEmitEventTimeLag"] == 1_000
