"""WatermarkStrategy: PyFlink builder API and Flink's generator arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.common.time import Duration
from sparkpoint.common.watermark_strategy import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    NO_TIMESTAMP,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    TimestampAssigner,
    WatermarkAlignmentParams,
    WatermarkStrategy,
    WatermarksWithIdleness,
)
from sparkpoint.testing import ManualClock


class FieldAssigner(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def test_constants_are_java_long_bounds() -> None:
    assert MAX_WATERMARK == 9223372036854775807
    assert MIN_WATERMARK == -9223372036854775808
    assert NO_TIMESTAMP == MIN_WATERMARK


def test_bounded_out_of_orderness_is_max_minus_bound_minus_one() -> None:
    gen = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_seconds(5)
    ).create_watermark_generator()
    assert gen.current_watermark() == MIN_WATERMARK
    gen.on_event(10_000)
    assert gen.current_watermark() == 4_999
    gen.on_event(7_000)  # late event does not move the watermark back
    assert gen.current_watermark() == 4_999
    gen.on_event(12_500)
    assert gen.current_watermark() == 7_499


def test_monotonous_is_max_minus_one() -> None:
    gen = WatermarkStrategy.for_monotonous_timestamps().create_watermark_generator()
    assert gen.current_watermark() == MIN_WATERMARK
    gen.on_event(1)
    assert gen.current_watermark() == 0
    gen.on_event(100)
    gen.on_event(50)
    assert gen.current_watermark() == 99


def test_min_timestamp_event_does_not_underflow() -> None:
    gen = BoundedOutOfOrdernessWatermarks(1000)
    gen.on_event(MIN_WATERMARK)
    assert gen.current_watermark() == MIN_WATERMARK


def test_no_watermarks_never_advances() -> None:
    strategy = WatermarkStrategy.no_watermarks()
    gen = strategy.create_watermark_generator()
    assert isinstance(gen, NoWatermarksGenerator)
    gen.on_event(10**12)
    assert gen.current_watermark() == MIN_WATERMARK
    assert strategy.generates_watermarks() is False
    assert WatermarkStrategy.for_monotonous_timestamps().generates_watermarks() is True


def test_each_generator_is_independent() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    a, b = strategy.create_watermark_generator(), strategy.create_watermark_generator()
    a.on_event(500)
    assert a.current_watermark() == 499
    assert b.current_watermark() == MIN_WATERMARK


def test_with_timestamp_assigner_returns_same_strategy_like_pyflink() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    assigner = FieldAssigner()
    assert strategy.with_timestamp_assigner(assigner) is strategy
    assert strategy.get_timestamp_assigner() is assigner
    assert assigner.extract_timestamp(("a", 42), NO_TIMESTAMP) == 42


def test_with_timestamp_assigner_accepts_callable() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda value, ts: value * 10
    )
    assigner = strategy.get_timestamp_assigner()
    assert isinstance(assigner, TimestampAssigner)
    assert assigner.extract_timestamp(7, NO_TIMESTAMP) == 70


def test_with_timestamp_assigner_rejects_non_callable() -> None:
    with pytest.raises(TypeError, match="TimestampAssigner"):
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(5)  # type: ignore[arg-type]


def test_timestamp_assigner_is_abstract() -> None:
    with pytest.raises(TypeError):
        TimestampAssigner()  # type: ignore[abstract]


def test_default_has_no_assigner_idleness_or_alignment() -> None:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(250))
    assert strategy.get_timestamp_assigner() is None
    assert strategy.get_idle_timeout_ms() is None
    assert strategy.get_watermark_alignment() is None
    assert strategy.get_out_of_orderness_ms() == 250


def test_with_idleness_is_a_copy_that_keeps_the_assigner() -> None:
    assigner = FieldAssigner()
    base = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20))
    base.with_timestamp_assigner(assigner)
    idle = base.with_idleness(Duration.of_minutes(1))
    assert idle is not base
    assert base.get_idle_timeout_ms() is None
    assert idle.get_idle_timeout_ms() == 60_000
    assert idle.get_timestamp_assigner() is assigner
    assert idle.get_out_of_orderness_ms() == 20_000


def test_idleness_detection_with_fake_clock() -> None:
    clock = ManualClock(1_000)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(500))
    gen = strategy.create_watermark_generator(clock=clock)
    assert isinstance(gen, WatermarksWithIdleness)
    assert gen.is_idle() is False
    clock.ms = 1_499
    assert gen.is_idle() is False
    clock.ms = 1_500  # no event for the whole timeout since creation
    assert gen.is_idle() is True
    gen.on_event(77)
    assert gen.is_idle() is False
    assert gen.current_watermark() == 76
    clock.ms = 2_000
    assert gen.is_idle() is True


def test_non_idle_generator_never_idle() -> None:
    gen = WatermarkStrategy.for_monotonous_timestamps().create_watermark_generator()
    assert gen.is_idle() is False


def test_with_idleness_rejects_zero_and_wrong_type() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    with pytest.raises(ValueError, match="idle_timeout"):
        strategy.with_idleness(Duration.of_millis(0))
    with pytest.raises(TypeError, match="idle_timeout must be a Duration"):
        strategy.with_idleness(1000)  # type: ignore[arg-type]


def test_bounded_rejects_negative_and_non_duration() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(-1))
    with pytest.raises(TypeError, match="max_out_of_orderness must be a Duration"):
        WatermarkStrategy.for_bounded_out_of_orderness(5)  # type: ignore[arg-type]


def test_with_watermark_alignment_recorded() -> None:
    base = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20))
    aligned = base.with_watermark_alignment("group-1", Duration.of_seconds(20))
    assert aligned.get_watermark_alignment() == WatermarkAlignmentParams("group-1", 20_000, 1_000)
    custom = base.with_watermark_alignment(
        "group-1", Duration.of_seconds(20), Duration.of_seconds(2)
    )
    assert custom.get_watermark_alignment() == WatermarkAlignmentParams("group-1", 20_000, 2_000)
    assert base.get_watermark_alignment() is None
    # Generators are unaffected by alignment.
    gen = aligned.create_watermark_generator()
    gen.on_event(30_000)
    assert gen.current_watermark() == 9_999


def test_with_watermark_alignment_validates() -> None:
    base = WatermarkStrategy.for_monotonous_timestamps()
    with pytest.raises(ValueError, match="watermark_group"):
        base.with_watermark_alignment("", Duration.of_seconds(1))
    with pytest.raises(ValueError, match="positive"):
        base.with_watermark_alignment("g", Duration.of_millis(0))


def test_repr_names_the_kind() -> None:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(3)).with_idleness(
        Duration.of_seconds(9)
    )
    assert repr(strategy) == (
        "WatermarkStrategy(bounded_out_of_orderness, out_of_orderness=3000 ms, "
        "idle_timeout=9000 ms)"
    )
