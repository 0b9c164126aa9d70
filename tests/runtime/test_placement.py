"""Placement of keyed subtasks on executors (pure bookkeeping, no Spark)."""

from __future__ import annotations

from collections import Counter

from sparkpoint.runtime.spark.placement import ExecutorSlot, Move, Placement


def _executors(*specs: tuple[str, int]) -> dict[str, ExecutorSlot]:
    return {e: ExecutorSlot(e, f"10.0.0.{i}", cores) for i, (e, cores) in enumerate(specs)}


def test_subtasks_spread_over_executors_by_cores() -> None:
    placement = Placement()
    moves = placement.update(_executors(("0", 1), ("1", 1), ("2", 2)), {7: 8, 9: 4})
    assert len(moves) == 12 and all(m.old_executor is None for m in moves)
    load = Counter(e for stage in (7, 9) for e in placement.assigned[stage])
    assert load == {"0": 3, "1": 3, "2": 6}  # per core: 3, 3, 3
    first = placement.executor_of(7, 0)
    assert first == "2"  # the most free cores
    assert placement.locations(7)[0] == "executor_10.0.0.2_2"


def test_a_subtask_moves_only_when_its_executor_is_lost() -> None:
    placement = Placement()
    placement.update(_executors(("0", 1), ("1", 1), ("2", 1)), {1: 6})
    before = list(placement.assigned[1])
    version = placement.version
    # a new executor joins: nothing moves
    assert placement.update(_executors(("0", 1), ("1", 1), ("2", 1), ("3", 1)), {1: 6}) == []
    assert placement.assigned[1] == before and placement.version == version
    # executor 1 is lost: exactly its two subtasks move, to the least loaded executors
    moves = placement.update(_executors(("0", 1), ("2", 1), ("3", 1)), {1: 6})
    lost = [i for i, e in enumerate(before) if e == "1"]
    assert sorted(m.subtask for m in moves) == lost
    assert all(m.old_executor == "1" and m.new_executor != "1" for m in moves)
    assert Counter(placement.assigned[1]) == {"0": 2, "2": 2, "3": 2}
    assert placement.version == version + 1


def test_observed_executor_becomes_the_placement() -> None:
    placement = Placement()
    placement.update(_executors(("0", 1), ("1", 1)), {3: 2})
    assert placement.executor_of(3, 0) == "0"
    assert placement.observe(3, 0, "1") is True
    assert placement.executor_of(3, 0) == "1"
    assert placement.observe(3, 0, "1") is False
    assert placement.observe(3, 0, "gone") is False  # not a live executor


def test_no_executors_places_nothing() -> None:
    placement = Placement()
    assert placement.update({}, {1: 2}) == []
    assert placement.locations(1) == ["", ""]
    assert Move(1, 0, None, "0").new_executor == "0"
