"""A source task's record times: count, oldest, newest and sum of its records' timestamps
(ingestion time for records without one) and Flink's ``currentEmitEventTimeLag``."""

from __future__ import annotations

import pickle

from sparkpoint.metrics.record_times import RecordTimes, RecordTimesAccumulator, SourceRecordTimes


class _Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_batches_with_timestamps_fold_into_count_oldest_newest_and_sum() -> None:
    clock = _Clock(10_000)
    acc = RecordTimesAccumulator(clock)
    acc.add([1_000, 3_000, 2_000], 3)
    clock.now = 12_000
    acc.add([500, 4_000], 2)
    report = acc.result("kafka")
    assert report == SourceRecordTimes("kafka", RecordTimes(5, 500, 4_000, 10_500, 0), 8_000)
    assert pickle.loads(pickle.dumps(report)) == report  # travels in the task report


def test_records_without_timestamps_count_from_when_the_task_read_them() -> None:
    clock = _Clock(7_000)
    acc = RecordTimesAccumulator(clock)
    acc.add(None, 4)
    clock.now = 7_050
    acc.add(None, 2)
    acc.add(None, 0)  # an empty batch changes nothing
    assert acc.result("seq") == SourceRecordTimes(
        "seq", RecordTimes(6, 7_000, 7_050, 4 * 7_000 + 2 * 7_050, 6), None
    )


def test_a_record_without_timestamp_among_others_counts_from_ingestion() -> None:
    clock = _Clock(5_000)
    acc = RecordTimesAccumulator(clock)
    acc.add([1_000, None, 3_000], 3)
    assert acc.result("k") == SourceRecordTimes("k", RecordTimes(3, 1_000, 5_000, 9_000, 1), 2_000)
    clock.now = 6_000
    acc.add([None], 1)  # min()/max() of one None do not raise; sum() does
    acc.add([None, 2_500], 2)
    assert acc.result("k") == SourceRecordTimes(
        "k", RecordTimes(6, 1_000, 6_000, 9_000 + 6_000 + 6_000 + 2_500, 3), 3_500
    )
    clock.now = 6_100
    acc.add([4_000, None], 2)  # the last record has none: the emit lag stays
    assert acc.result("k").emit_lag_ms == 3_500


def test_nothing_read_reports_no_times() -> None:
    assert RecordTimesAccumulator().result("k") == SourceRecordTimes("k", None, None)


def test_merge_all_skips_sources_that_read_nothing() -> None:
    a, b = RecordTimes(2, 10, 20, 30), RecordTimes(1, 5, 5, 5, 1)
    assert RecordTimes.merge_all([None, a, RecordTimes(0, 0, 0, 0), b]) == RecordTimes(
        3, 5, 20, 35, 1
    )
    assert RecordTimes.merge_all([None]) is None
