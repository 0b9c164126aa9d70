"""Kafka record timestamps become the stream's record timestamps, as in Flink's KafkaSource:
``WatermarkStrategy.for_monotonous_timestamps()`` without a timestamp assigner drives
event-time tumbling windows over a topic whose producer set every record's timestamp."""

from __future__ import annotations

import collections
from typing import Any

from sparkpoint.common import Configuration, SimpleStringSchema, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from sparkpoint.datastream.window import TumblingEventTimeWindows
from sparkpoint.metrics.record_times import wall_clock_ms
from tests.fixtures.kafka import KafkaBroker, ordered_producer

PARTITIONS = 4
KEYS = 8
N = 4000
T0 = 1_700_000_000_123  # not on a window boundary
STEP = 7  # ms between consecutive records: windows of 1 s hold 142 or 143 records
WINDOW = 1000
JOB = "kafka-record-timestamps"


def _timestamp(x: int) -> int:
    return T0 + STEP * x


def _produce(bootstrap: str, topic: str) -> None:
    """Record ``x`` is ``"<x % KEYS>,<x>"`` in partition ``x % PARTITIONS`` with timestamp
    ``_timestamp(x)``: increasing within every partition."""
    producer = ordered_producer(bootstrap)
    for x in range(N):
        producer.produce(
            topic, f"{x % KEYS},{x}".encode(), partition=x % PARTITIONS, timestamp=_timestamp(x)
        )
    assert producer.flush(60) == 0


def _expected() -> collections.Counter[tuple[int, int, int]]:
    counts: collections.Counter[tuple[int, int, int]] = collections.Counter()
    for x in range(N):
        ts = _timestamp(x)
        counts[(x % KEYS, ts - ts % WINDOW, 0)] += 1
    return collections.Counter({(k, start, n): 1 for (k, start, _), n in counts.items()})


def _parse(line: str) -> tuple[int, int]:
    k, x = line.split(",")
    return int(k), int(x)


class _Count(ProcessWindowFunction):
    """``(key, window start, count)`` plus the watermark the window fired at."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield (key, context.window().start, sum(1 for _ in elements)), context.current_watermark()


def test_event_time_windows_on_kafka_record_timestamps(
    spark: Any, tmp_path: Any, kafka_broker: KafkaBroker
) -> None:
    topic = "record-timestamps"
    kafka_broker.create_topic(topic, PARTITIONS)
    _produce(kafka_broker.bootstrap_servers, topic)
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", "250")
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_broker.bootstrap_servers)
        .set_topics(topic)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    sink = CollectSink()
    (
        env.from_source(source, WatermarkStrategy.for_monotonous_timestamps(), "kafka")
        .map(_parse)
        .key_by(lambda kv: kv[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW)))
        .process(_Count())
        .sink_to(sink)
    )
    started_ms = wall_clock_ms()
    client = env.execute_async(JOB)
    client.wait(timeout=300)
    ended_ms = wall_clock_ms()
    got = collections.Counter(result for result, _watermark in sink.collected)
    assert got == _expected()
    # Watermarks followed the records' timestamps: most windows fired before the input ended.
    fired_early = [w for _result, w in sink.collected if w < MAX_WATERMARK]
    assert len(fired_early) > len(sink.collected) // 2
    _assert_record_latency(client, started_ms, ended_ms)


def _assert_record_latency(client: Any, started_ms: int, ended_ms: int) -> None:
    """The end-to-end latency gauges count from the Kafka record timestamps. The collect
    sink publishes at each epoch's end; the last epoch read records 3000..3999 (250 offsets
    of each partition), so its oldest record is 999 steps older than its newest."""
    metrics = client.get_metrics()
    newest, mean, oldest = (
        metrics[f"{JOB}.sparkpoint.lastCommitRecordLatency{m}"] for m in ("Min", "Mean", "Max")
    )
    last = _timestamp(N - 1)
    assert started_ms - last <= newest <= ended_ms - last
    assert oldest - newest == STEP * 999 > 0
    last_epoch = [_timestamp(x) for x in range(N - 1000, N)]
    assert oldest - mean == round(sum(last_epoch) / len(last_epoch)) - last_epoch[0]
    # Each partition's last record (3996..3999) was emitted during the run.
    lags = [v for k, v in metrics.items() if k.endswith(".currentEmitEventTimeLag")]
    assert len(lags) == PARTITIONS
    assert all(started_ms - last <= lag <= ended_ms - _timestamp(N - PARTITIONS) for lag in lags)
