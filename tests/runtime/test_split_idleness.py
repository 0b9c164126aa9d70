"""The driver's idle splits and the combined watermark, without Spark: a split with nothing
to read for the idle timeout is left out of the minimum, one first seen starts its timer,
a restore restarts every timer, and the combined watermark never goes back."""

from __future__ import annotations

from sparkpoint.common import Duration, WatermarkStrategy
from sparkpoint.connectors.source import SplitRange
from sparkpoint.runtime.driver.split_idleness import SplitIdleness
from sparkpoint.runtime.graph import Node, NodeKind, Plan, Stage
from sparkpoint.runtime.task.watermarks import MIN_WATERMARK, combined_watermark
from sparkpoint.testing import ManualClock


def _plan(strategy: WatermarkStrategy) -> Plan:
    source = Node(1, NodeKind.SOURCE, "kafka", uid="kafka")
    stamps = Node(2, NodeKind.TIMESTAMPS, "ts", [source], watermark_strategy=strategy, uid="ts")
    stage = Stage(0, [source], 0, source=source, members=[source, stamps])
    return Plan([stage], [source], [], [source, stamps])


def _range(split: str) -> SplitRange:
    return SplitRange(split, 0, 10, {}, False)


def test_idle_splits_after_their_timeout() -> None:
    clock = ManualClock(1000)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(300))
    idleness = SplitIdleness(_plan(strategy), clock)
    splits = {0: ["t-0", "t-1"]}
    idleness.observe({0: [_range("t-0"), _range("t-1")]}, splits)
    assert idleness.idle_keys() == frozenset()
    clock.advance(299)
    idleness.observe({0: [_range("t-0")]}, splits)
    assert idleness.idle_keys() == frozenset()
    clock.advance(1)
    idleness.observe({0: [_range("t-0")]}, {0: ["t-0", "t-1", "t-2"]})
    assert idleness.idle_keys() == {"ts@t-1"}  # t-2 was just found: its timer starts now
    clock.advance(300)
    idleness.observe({0: [_range("t-1")]}, {0: ["t-0", "t-1", "t-2"]})
    assert idleness.idle_keys() == {"ts@t-0", "ts@t-2"}
    idleness.reset()
    assert idleness.idle_keys() == frozenset()
    idleness.observe({0: []}, splits)
    assert idleness.idle_keys() == frozenset()


def test_no_idleness_without_with_idleness() -> None:
    clock = ManualClock(0)
    idleness = SplitIdleness(_plan(WatermarkStrategy.for_monotonous_timestamps()), clock)
    idleness.observe({0: [_range("t-0")]}, {0: ["t-0", "t-1"]})
    clock.advance(10**9)
    idleness.observe({0: []}, {0: ["t-0", "t-1"]})
    assert idleness.idle_keys() == frozenset()


def test_combined_watermark() -> None:
    marks = {"ts@t-0": 5000, "ts@t-1": 1000}
    assert combined_watermark({}, frozenset(), MIN_WATERMARK) == MIN_WATERMARK
    assert combined_watermark(marks, frozenset(), MIN_WATERMARK) == 1000
    assert combined_watermark(marks, frozenset({"ts@t-1"}), MIN_WATERMARK) == 5000
    # t-1 reads again: the watermark does not go back below what was shipped.
    assert combined_watermark(marks, frozenset(), 5000) == 5000
    # Every split idle: it stays where it was.
    assert combined_watermark(marks, frozenset(marks), 3000) == 3000
