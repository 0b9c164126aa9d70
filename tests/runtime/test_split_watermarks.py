"""Each source split keeps its own watermark generator state across epochs: a split whose
timestamps advance more slowly than another's loses no record as late."""

from __future__ import annotations

from typing import Any

from sparkpoint.common import Configuration, Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream.window import TumblingEventTimeWindows

N = 4000


class ValueAsTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value)


def test_a_slow_split_loses_no_record_as_late(env: Any) -> None:
    # Two splits, [0, 2000) and [2000, 4000): timestamps of the second run 2 s ahead of the
    # first's in every epoch; each split's watermark must follow its own timestamps.
    env.configure(Configuration().set_string("sparkpoint.epoch.max-records-per-split", "200"))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(0)
    ).with_timestamp_assigner(ValueAsTime())
    counts = list(
        env.from_source(NumberSequenceSource(0, N - 1), None, "numbers")
        .set_parallelism(2)
        .assign_timestamps_and_watermarks(strategy)
        .map(lambda x: (x % 3, 1))
        .key_by(lambda p: p[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(500)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect()
    )
    assert sum(c for _, c in counts) == N
    assert len(counts) == 3 * (N // 500)
