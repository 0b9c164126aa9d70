"""``sparkpoint.epoch.mode=long-running``: epochs run in one Spark job of long-lived tasks;
exactly-once under task failures and killed Python workers, without a whole-job restart
while Spark's task retries last (local[2,4]: four)."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from sparkpoint.common import RestartStrategies
from sparkpoint.datastream import CheckpointingMode, FileSystemCheckpointStorage
from sparkpoint.metrics.record_times import wall_clock_ms
from sparkpoint.runtime.spark.epoch import job_group
from sparkpoint.testing import FailureInjector, expected_keyed_count_output
from tests.runtime.jobs.reference import keyed_count_job, read_sink

N_EVENTS = 6000
N_KEYS = 17


def _configure(env: Any, tmp_path: Any) -> None:
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.configure(
        {
            "sparkpoint.epoch.max-records-per-split": "700",
            "sparkpoint.epoch.mode": "long-running",
        }
    )


def _check_exact(out: list[tuple[Any, ...]]) -> None:
    recs, finals = expected_keyed_count_output(N_EVENTS, N_KEYS)
    echoed = collections.Counter(o for o in out if o[0] == "rec")
    assert set(echoed) == recs
    assert all(c == 1 for c in echoed.values()), "duplicates in exactly-once output"
    assert {o[1]: (o[2], o[3]) for o in out if o[0] == "final"} == finals


def _spark_jobs(spark: Any, job_id: str) -> list[str]:
    """Descriptions of the Spark jobs the sparkpoint job ran."""
    tracker = spark.sparkContext.statusTracker()
    ids = sorted(tracker.getJobIdsForGroup(job_group(job_id)))
    described = []
    for i in ids:
        info = spark.sparkContext._jsc.sc().statusStore().job(i)
        described.append(str(info.description().get()) if info.description().isDefined() else "")
    return described


def test_epochs_run_without_a_spark_job_each(env: Any, spark: Any, tmp_path: Any) -> None:
    _configure(env, tmp_path)
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    started_ms = wall_clock_ms()
    client = env.execute_async("long-running")
    result = client.get_job_execution_result().result(timeout=300)
    ran_ms = wall_clock_ms() - started_ms
    _check_exact(read_sink(out_dir))
    # The source tasks' record times reach the driver as in the job mode: the numbers carry
    # no timestamp, so they count from when the long-running task read them to the file
    # sink's commit, both within the run.
    metrics = client.get_metrics()
    newest, mean, oldest = (
        metrics[f"long-running.sparkpoint.lastCommitRecordLatency{m}"]
        for m in ("Min", "Mean", "Max")
    )
    assert 0 <= newest <= mean <= oldest <= ran_ms
    jobs = _spark_jobs(spark, result.job_id)
    assert result.epochs >= 4
    # one launch of the tasks, then the local state cleanup at the end
    assert [d for d in jobs if "long-running tasks" in d] == [
        "sparkpoint long-running long-running tasks (launch 1)"
    ]
    assert len(jobs) == 2, jobs
    assert result.restarts == 0


@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_task_failure_runs_the_epoch_again_without_a_restart(
    env: Any, spark: Any, tmp_path: Any, mode: str
) -> None:
    """One failure (an exception, or the Python worker killed mid-epoch) relaunches the
    tasks and runs the epoch again: exact output, no whole-job restart."""
    inj = FailureInjector(str(tmp_path / "inj"), N_EVENTS // 2 + 3, times=1, mode=mode)
    _configure(env, tmp_path)
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS, injector=inj)
    result = env.execute("long-running-fault")
    assert inj.fired() == 1
    _check_exact(read_sink(out_dir))
    assert result.restarts == 0
    launches = [d for d in _spark_jobs(spark, result.job_id) if "long-running tasks" in d]
    assert len(launches) == 2, launches


def test_failures_beyond_spark_retries_fail_over(env: Any, spark: Any, tmp_path: Any) -> None:
    """Four failures in one epoch (local[2,4]'s task attempts) fail the epoch over: the
    job restores from its latest checkpoint, still exact."""
    inj = FailureInjector(str(tmp_path / "inj"), N_EVENTS // 3, times=4)
    _configure(env, tmp_path)
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS, injector=inj)
    result = env.execute("long-running-failover")
    assert inj.fired() == 4
    assert result.restarts == 1
    _check_exact(read_sink(out_dir))
