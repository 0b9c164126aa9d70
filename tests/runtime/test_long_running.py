"""``sparkpoint.epoch.mode=long-running``: epochs run in one Spark job of long-lived tasks;
exactly-once under task failures and killed Python workers: only the failed task's groups
run again, without a whole-job restart while Spark's task retries last (local[2,4]:
four)."""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

import pytest

from sparkpoint.common import Configuration, RestartStrategies
from sparkpoint.datastream import (
    CheckpointingMode,
    FileSystemCheckpointStorage,
    StreamExecutionEnvironment,
)
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
    # one launch of the tasks (a Spark job per task slot), then the local state cleanup
    assert sorted(d for d in jobs if "long-running task" in d) == [
        f"sparkpoint long-running long-running task {slot} (launch 1)" for slot in (0, 1)
    ]
    assert len(jobs) == 3, jobs
    assert result.restarts == 0


@pytest.mark.parametrize("where", ["keyed", "source"])
@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_a_task_failure_runs_only_its_groups_again(
    env: Any, spark: Any, tmp_path: Any, mode: str, where: str, caplog: Any
) -> None:
    """One failure (an exception, or the Python worker killed mid-epoch) in a keyed or a
    source group: Spark retries that task, and only its unfinished groups run again, in
    the same launch of the tasks: exact output, no whole-job restart, no relaunch."""
    inj = FailureInjector(str(tmp_path / "inj"), N_EVENTS // 2 + 3, times=1, mode=mode)
    _configure(env, tmp_path)
    out_dir = str(tmp_path / "out")
    if where == "keyed":
        keyed_count_job(env, out_dir, N_EVENTS, N_KEYS, injector=inj)
    else:
        keyed_count_job(env, out_dir, N_EVENTS, N_KEYS, map_injector=inj)
    with caplog.at_level(logging.WARNING, logger="sparkpoint.runtime.spark.long_running"):
        result = env.execute("long-running-fault")
    assert inj.fired() == 1
    _check_exact(read_sink(out_dir))
    assert result.restarts == 0
    launches = {d[-10:] for d in _spark_jobs(spark, result.job_id) if "long-running task" in d}
    assert launches == {"(launch 1)"}, launches
    again = [
        r.getMessage() for r in caplog.records if "run again in its next attempt" in r.getMessage()
    ]
    assert len(again) == 1, again


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


class _Slow:
    """Stands in for a map's failure injector: 2 ms per record, so a job lasts seconds."""

    def maybe_fail(self, record: int) -> None:
        time.sleep(0.002)


def _auto_env(spark: Any, tmp_path: Any, name: str) -> Any:
    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / name / "local-state"))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    _configure(env, tmp_path / name)
    env.configure({"sparkpoint.epoch.mode": "auto"})  # over _configure's long-running
    return env


def test_auto_mode_runs_long_running_alone_and_gives_the_slots_to_a_second_job(
    spark: Any, tmp_path: Any, caplog: Any
) -> None:
    """``auto``: a job alone in its application runs its epochs in long-running tasks; once
    a second sparkpoint job starts, the first gives the task slots back before its next
    epoch and both run a Spark job per epoch, exact."""
    first = _auto_env(spark, tmp_path, "first")
    first_out = str(tmp_path / "first" / "out")
    keyed_count_job(first, first_out, N_EVENTS, N_KEYS, map_injector=_Slow())  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="sparkpoint.runtime.spark.auto_mode"):
        client = first.execute_async("auto-first")
        deadline = time.monotonic() + 120
        while not [d for d in _spark_jobs(spark, client.get_job_id()) if "long-running" in d]:
            assert time.monotonic() < deadline, "the first job never ran long-running tasks"
            assert not client.get_job_execution_result().done(), "the first job ended early"
            time.sleep(0.05)
        second = _auto_env(spark, tmp_path, "second")
        second_out = str(tmp_path / "second" / "out")
        keyed_count_job(second, second_out, N_EVENTS, N_KEYS)
        assert not client.get_job_execution_result().done(), "the first job ended too early"
        second_result = second.execute("auto-second")
        first_result = client.get_job_execution_result().result(timeout=300)
    _check_exact(read_sink(first_out))
    _check_exact(read_sink(second_out))
    assert first_result.restarts == 0 and second_result.restarts == 0
    first_jobs = _spark_jobs(spark, first_result.job_id)
    assert sorted(d for d in first_jobs if "long-running task" in d) == [
        f"sparkpoint auto-first long-running task {slot} (launch 1)" for slot in (0, 1)
    ]
    assert len(first_jobs) > 3, "the first job ran no epoch as a Spark job"
    assert not [d for d in _spark_jobs(spark, second_result.job_id) if "long-running" in d]
    released = [r.getMessage() for r in caplog.records if "run as Spark jobs" in r.getMessage()]
    assert released and "another sparkpoint job" in released[0], released
