"""Task groups: which subtasks each Spark task runs, and the shuffle partition of each
channel (pure bookkeeping, no Spark)."""

from __future__ import annotations

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
