"""Per-partition watermarks with idleness on a ``KafkaSource``, as Flink's split-level
watermarks (``WatermarkOutputMultiplexer``): each partition has its own watermark, the
stream's is the minimum over the active ones, and ``with_idleness(d)`` leaves out a
partition that had no record for ``d``.

Partition 0 holds six seconds of event time, partition 1 one and a half. Partition 1 and
the first quarter of partition 0 are read, then, once both have been idle for twice the
timeout, the rest of partition 0 arrives: partition 1 has nothing more. Without idleness
the stream's watermark stays at partition 1's (only the first window fires); with idleness
partition 1 is left out and every window up to partition 0's watermark fires. (Were both
read in one go, both could turn idle at once, however fast the epochs: then, as in Flink's
``CombinedWatermarkStatus``, the watermark would not move.)
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import ProcessWindowFunction
from sparkpoint.datastream.window import TumblingEventTimeWindows
from tests.connectors.kafka.source_jobs import (
    cancel,
    produce,
    run_epochs,
    source_env,
    unbounded_source,
    wait_for,
)
from tests.fixtures.kafka import KafkaBroker

T0 = 1_700_000_000_000  # on a window boundary
STEP = 10  # ms between a partition's records
WINDOW = 1000
RECORDS = {0: 600, 1: 150}  # partition -> records: 6 s and 1.5 s of event time
IDLE_MS = 300


class _Count(ProcessWindowFunction):
    """``(partition, window start, records)``."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield key, context.window().start, sum(1 for _ in elements)


def _parse(line: str) -> tuple[int, int]:
    p, i = line.split(",")
    return int(p), int(i)


def _windows_up_to(watermark: int) -> collections.Counter[tuple[int, int, int]]:
    """The windows that fire once the stream's watermark is ``watermark``: those whose
    last millisecond it reached."""
    counts: collections.Counter[tuple[int, int]] = collections.Counter()
    for p, n in RECORDS.items():
        for i in range(n):
            ts = T0 + STEP * i
            counts[(p, ts - ts % WINDOW)] += 1
    return collections.Counter(
        {(p, start, n): 1 for (p, start), n in counts.items() if start + WINDOW - 1 <= watermark}
    )


@pytest.mark.parametrize("idleness", [True, False], ids=["with-idleness", "without"])
def test_an_idle_partition_holds_windows_back_unless_idleness_is_set(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker, idleness: bool
) -> None:
    topic = f"partition-watermarks-{'idle' if idleness else 'plain'}"
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic, 2)
    records = [(p, f"{p},{i}", T0 + STEP * i) for p, n in RECORDS.items() for i in range(n)]
    first = [r for r in records if r[0] == 1 or int(r[1].split(",")[1]) < RECORDS[0] // 4]
    produce(bootstrap, topic, first)
    env = source_env(spark, tmp_path, per_split=100, checkpoint_ms=None)
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    if idleness:
        strategy = strategy.with_idleness(Duration.of_millis(IDLE_MS))
    sink = CollectSink()
    (
        env.from_source(unbounded_source(bootstrap).set_topics(topic).build(), strategy, "kafka")
        .map(_parse)
        .key_by(lambda kv: kv[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW)))
        .process(_Count())
        .sink_to(sink)
    )
    # Monotonous timestamps: a partition's watermark is its latest timestamp - 1.
    last = {p: T0 + STEP * (n - 1) - 1 for p, n in RECORDS.items()}
    expected = _windows_up_to(last[0] if idleness else min(last.values()))
    client = env.execute_async(f"partition-watermarks-{idleness}")
    progress = client.job_master.progress
    try:
        wait_for(client, lambda: progress.records_in >= len(first), "the first records read")
        time.sleep(2 * IDLE_MS / 1000)
        produce(bootstrap, topic, [r for r in records if r not in first])
        total = sum(RECORDS.values())
        wait_for(client, lambda: progress.records_in >= total, "every record read")
        wait_for(client, lambda: len(sink.collected) >= sum(expected.values()), "the windows")
        # Epochs go on (time-paced, nothing to read); no other window may fire.
        run_epochs(client, 3)
    finally:
        cancel(client)
    assert collections.Counter(sink.collected) == expected
    assert len(expected) == (7 if idleness else 2)
