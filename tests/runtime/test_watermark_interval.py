"""``pipeline.auto-watermark-interval``: 0 turns periodic watermarks off, as in Flink (event
time stays at its minimum until the input ends; then every event-time timer fires)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.common import Configuration, Types, WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment

MIN = -(2**63)


class WatermarkSeen(KeyedProcessFunction):
    """Emits each record with the watermark it saw, and a timer at its timestamp + 1."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1)
        yield "record", value, ctx.timer_service().current_watermark()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield "timer", timestamp, ctx.timer_service().current_watermark()


def _run(env: StreamExecutionEnvironment, interval: int | None, via_config: bool) -> list[Any]:
    env.set_parallelism(1)
    conf = Configuration().set_string("sparkpoint.epoch.max-records-per-split", "1")
    if interval is not None and via_config:
        conf.set_string("pipeline.auto-watermark-interval", f"{interval} ms")
    env.configure(conf)
    if interval is not None and not via_config:
        env.get_config().set_auto_watermark_interval(interval)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda v, _ts: v * 10
    )
    stream = (
        env.from_collection([1, 2, 3], type_info=Types.INT())
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda v: 0)
        .process(WatermarkSeen())
    )
    return list(stream.execute_and_collect())


def test_periodic_watermarks_advance_every_epoch(env: StreamExecutionEnvironment) -> None:
    assert _run(env, None, False) == [
        ("record", 1, MIN),
        ("record", 2, 9),
        ("timer", 11, 19),
        ("record", 3, 19),
        ("timer", 21, 2**63 - 1),
        ("timer", 31, 2**63 - 1),
    ]


@pytest.mark.parametrize("via_config", [False, True], ids=["api", "configuration"])
def test_interval_zero_holds_event_time_until_the_input_ends(
    env: StreamExecutionEnvironment, via_config: bool
) -> None:
    expected = [
        ("record", 1, MIN),
        ("record", 2, MIN),
        ("record", 3, MIN),
        ("timer", 11, 2**63 - 1),
        ("timer", 21, 2**63 - 1),
        ("timer", 31, 2**63 - 1),
    ]
    assert _run(env, 0, via_config) == expected
    assert env.get_config().get_auto_watermark_interval() == 0
