"""Task groups on Spark: at parallelism 6 with one Spark task per core (``local[2]``),
each Spark task runs three subtasks; every subtask keeps its own exactly-once state and
recovery (local Spark)."""

from __future__ import annotations

import collections
import shutil
from typing import Any

from sparkpoint.common import RestartStrategies
from sparkpoint.datastream import CheckpointingMode, FileSystemCheckpointStorage
from sparkpoint.runtime.spark.epoch import job_group
from sparkpoint.testing import (
    EpochStart,
    FailureInjector,
    Faults,
    expected_keyed_count_output,
    local_state_dirs,
)
from tests.runtime.jobs.reference import keyed_count_job, read_sink

N_EVENTS = 6000
N_KEYS = 17
PARALLELISM = 6


def _configure(env: Any, tmp_path: Any) -> None:
    env.set_parallelism(PARALLELISM)
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.configure(
        {
            "sparkpoint.epoch.max-records-per-split": "300",
            "sparkpoint.epoch.tasks-per-core": "1",
        }
    )


def _check_exact(out: list[tuple[Any, ...]]) -> None:
    recs, finals = expected_keyed_count_output(N_EVENTS, N_KEYS)
    counts = collections.Counter(o for o in out if o[0] == "rec")
    assert set(counts) == recs and all(c == 1 for c in counts.values())
    final = {o[1]: (o[2], o[3]) for o in out if o[0] == "final"}
    assert len([o for o in out if o[0] == "final"]) == N_KEYS and final == finals


def _tasks_per_stage(spark: Any, job_id: str) -> collections.Counter[int]:
    """How many Spark tasks the epochs' stages had (count of stages by task count)."""
    tracker = spark.sparkContext.statusTracker()
    tasks: collections.Counter[int] = collections.Counter()
    for spark_job in tracker.getJobIdsForGroup(job_group(job_id)):
        info = tracker.getJobInfo(spark_job)
        for stage_id in info.stageIds if info is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                tasks[stage.numTasks] += 1
    return tasks


def test_grouped_subtasks_stay_exact_when_a_task_fails_after_a_local_commit(
    spark: Any, env: Any, tmp_path: Any
) -> None:
    """Subtask 1 fails once after its local commit: Spark retries its whole task (subtasks
    0-2), each of which undoes its own commit of the epoch; output and state stay exact,
    and every epoch ran two Spark tasks per stage for six subtasks."""
    marker = FailureInjector(str(tmp_path / "after-commit"), at_record=3, times=1)
    _configure(env, tmp_path)
    env.configure({"sparkpoint.epoch.mode": "job"})  # counts the Spark tasks of each epoch
    env.set_fault_injection(Faults().fail_after_local_commit(marker, "count", 1))
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    result = env.execute("grouped-after-commit")
    assert marker.fired() == 1
    assert result.restarts == 0 and result.failovers == () and result.subtask_restores == ()
    _check_exact(read_sink(out_dir))
    reports = result.epoch_reports
    assert len(reports) >= 3
    assert all(r.keyed_tasks == PARALLELISM == r.on_preferred_executor for r in reports)
    tasks = _tasks_per_stage(spark, result.job_id)
    assert set(tasks) <= {1, 2}  # never six: a stage's subtasks share two tasks
    assert tasks[2] >= 2 * len(reports)  # the source and the keyed stage of every epoch


def test_a_grouped_subtask_that_lost_its_state_restores_alone(env: Any, tmp_path: Any) -> None:
    """Subtask 0's local state vanishes before epoch 4: it alone restores (checkpoint plus
    changelog) while the two other subtasks of its task keep theirs; the result is exact."""
    lost: list[int] = []

    def lose_state(event: EpochStart) -> None:
        if event.epoch == 4 and not lost:
            (found,) = local_state_dirs(str(tmp_path / "local-state"), event.job_id, "count", 0)
            shutil.rmtree(found)
            lost.append(event.epoch)

    _configure(env, tmp_path)
    env.set_fault_injection(Faults().on_epoch_start(lose_state))
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    result = env.execute("grouped-lost-state")
    assert lost == [4]
    assert result.restarts == 0 and result.failovers == ()
    (restore,) = result.subtask_restores
    assert (restore.epoch, restore.operator_id, restore.subtask) == (4, "count", 0)
    _check_exact(read_sink(out_dir))
