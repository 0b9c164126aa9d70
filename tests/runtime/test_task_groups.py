"""Task groups: which subtasks each Spark task runs, and the shuffle partition of each
channel (pure bookkeeping, no Spark)."""

from __future__ import annotations

from sparkpoint.connectors.source import SplitRange
from sparkpoint.runtime.graph import Node, NodeKind, Plan, build_plan
from sparkpoint.runtime.protocol import EpochSpec, JobSpec
from sparkpoint.runtime.spark.epoch import layout
from sparkpoint.runtime.spark.task_groups import StageGroups, channel_partitions, group_subtasks


def test_few_subtasks_run_one_per_task() -> None:
    groups = group_subtasks(3, None, {"executor_h_driver": 2}, 2)
    assert groups == StageGroups(((0,), (1,), (2,)), ("", "", ""))


def test_many_subtasks_share_tasks_in_contiguous_runs_of_equal_size() -> None:
    groups = group_subtasks(10, None, {"a": 1, "b": 1}, 2)
    assert groups.groups == ((0, 1, 2), (3, 4, 5), (6, 7), (8, 9))
    assert groups.locations == ("", "", "", "")
    one = group_subtasks(128, None, {"a": 2}, 1)
    assert [len(g) for g in one.groups] == [64, 64]


def test_keyed_groups_hold_subtasks_of_one_executor_and_prefer_it() -> None:
    # Subtasks alternate between executor a (1 core) and b (2 cores); one task per core.
    locations = ["a", "b"] * 6
    groups = group_subtasks(12, locations, {"a": 1, "b": 2}, 1)
    assert groups.groups == ((0, 2, 4, 6, 8, 10), (1, 3, 5), (7, 9, 11))
    assert groups.locations == ("a", "b", "b")
    for group, location in zip(groups.groups, groups.locations, strict=True):
        assert {locations[s] for s in group} == {location}
    # every subtask is in exactly one group
    assert sorted(s for g in groups.groups for s in g) == list(range(12))


def test_subtasks_without_a_location_use_all_cores() -> None:
    groups = group_subtasks(6, ["", "", "", "", "a", "a"], {"a": 1, "b": 1}, 1)
    assert groups.groups == ((0, 1), (2, 3), (4, 5))
    assert groups.locations == ("", "", "a")


def test_channel_partitions_follow_the_consumers_groups() -> None:
    # consumer 1: channels 0..3 in groups (0, 2), (1, 3); consumer 2: channels 4..6, one each
    table, first = channel_partitions([(0, ((0, 2), (1, 3))), (4, ((0,), (1,), (2,)))], 7)
    assert table == (0, 1, 0, 1, 2, 3, 4)
    assert first == (0, 2)


def _source_plan() -> Plan:
    """numbers (source) -> key_by -> reduce (parallelism 2) -> sink."""
    source = Node(1, NodeKind.SOURCE, "numbers", [])
    keyed = Node(2, NodeKind.KEY_BY, "key_by", [source], key_selector=lambda x: x % 3)
    totals = Node(3, NodeKind.REDUCE, "totals", [keyed], parallelism=2)
    return build_plan([Node(4, NodeKind.SINK, "out", [totals])], 1, 128)


def _epoch(plan: Plan, records: list[int | None]) -> EpochSpec:
    job = JobSpec("job", "job", "app", None, False, None)  # type: ignore[arg-type]
    source = next(s for s in plan.stages if s.source is not None)
    ranges = [SplitRange(str(i), 0, n, {}, False, n) for i, n in enumerate(records)]
    return EpochSpec(job, 1, 1, None, 0, False, {}, {}, {source.id: ranges}, 0)


def test_a_sparse_source_stage_runs_one_task_per_core() -> None:
    """8 ranges on 2 cores: 4 tasks (2 per core) when the ranges hold a full range's worth
    or a range is uncounted, 2 when all of them together hold fewer records than a full one
    (sparse input: each task's fixed cost is paid once per core, no second wave)."""
    plan = _source_plan()
    source = next(s for s in plan.stages if s.source is not None)
    cores = {"executor_127.0.0.1_driver": 2}
    sparse = layout(plan, _epoch(plan, [124] * 8), {}, cores, 2, 1000)
    assert sparse.task_groups[source.id] == ((0, 1, 2, 3), (4, 5, 6, 7))
    full = layout(plan, _epoch(plan, [125] * 8), {}, cores, 2, 1000)
    assert full.task_groups[source.id] == ((0, 1), (2, 3), (4, 5), (6, 7))
    uncounted = layout(plan, _epoch(plan, [1] * 7 + [None]), {}, cores, 2, 1000)
    assert len(uncounted.task_groups[source.id]) == 4
    unbounded = layout(plan, _epoch(plan, [1] * 8), {}, cores, 2, None)
    assert len(unbounded.task_groups[source.id]) == 4
    keyed = next(s for s in plan.stages if s.keyed)
    assert sparse.task_groups[keyed.id] == ((0,), (1,))
