"""Exactly-once state and sink output under injected failures (local Spark)."""

from __future__ import annotations

import collections
import random
from typing import Any

import pytest

from sparkpoint.common import RestartStrategies
from sparkpoint.datastream import CheckpointingMode, FileSystemCheckpointStorage
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


def _configure(env: Any, tmp_path: Any, mode: Any) -> None:
    env.enable_checkpointing(10, mode)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.configure({"sparkpoint.epoch.max-records-per-split": "700"})


def _check(out: list[tuple[Any, ...]], exact: bool) -> None:
    recs, finals = expected_keyed_count_output(N_EVENTS, N_KEYS)
    echoed = [o for o in out if o[0] == "rec"]
    final = {o[1]: (o[2], o[3]) for o in out if o[0] == "final"}
    counts = collections.Counter(echoed)
    assert set(counts) == recs  # nothing lost
    if exact:
        assert all(c == 1 for c in counts.values()), "duplicates in exactly-once output"
        assert len([o for o in out if o[0] == "final"]) == N_KEYS
        assert final == finals  # exact state
    else:  # at least once: every key's final count and sum, none below the exact one
        assert set(final) == set(finals)
        for key, (count, total) in final.items():
            assert count >= finals[key][0] and total >= finals[key][1]


@pytest.mark.parametrize("times", [1, 4], ids=["spark-retry", "job-restore"])
@pytest.mark.parametrize("where", ["keyed", "map"])
def test_user_exception_at_random_record(env: Any, tmp_path: Any, times: int, where: str) -> None:
    """One failure is absorbed by Spark's task retry; four exhaust it, and the job master
    restores from the latest checkpoint. Either way, counts and output are exact."""
    at = random.Random(times * 31 + len(where)).randrange(N_EVENTS)
    inj = FailureInjector(str(tmp_path / "inj"), at, times=times)
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    out_dir = str(tmp_path / "out")
    keyed_count_job(
        env,
        out_dir,
        N_EVENTS,
        N_KEYS,
        injector=inj if where == "keyed" else None,
        map_injector=inj if where == "map" else None,
    )
    result = env.execute("exception")
    assert inj.fired() == times
    _check(read_sink(out_dir), exact=True)
    if times == 4:
        assert result.restarts == 1
    assert any(s.status == "COMPLETED" for s in result.checkpoints)


@pytest.mark.parametrize("times", [1, 4], ids=["spark-retry", "job-restore"])
def test_python_worker_sigkill(env: Any, tmp_path: Any, times: int) -> None:
    """SIGKILL of the Python worker in the middle of a keyed epoch."""
    inj = FailureInjector(str(tmp_path / "inj"), N_EVENTS // 2 + 3, times=times, mode="kill")
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS, injector=inj)
    env.execute("sigkill")
    assert inj.fired() == times
    _check(read_sink(out_dir), exact=True)


@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_job_restore_with_incremental_rocksdb(env: Any, tmp_path: Any, mode: str) -> None:
    """The same recovery with RocksDB incremental checkpoints (shared SST files)."""
    from sparkpoint.datastream import EmbeddedRocksDBStateBackend

    inj = FailureInjector(str(tmp_path / "inj"), N_EVENTS * 2 // 3, times=4, mode=mode)
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    env.set_state_backend(EmbeddedRocksDBStateBackend(True))
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS, injector=inj)
    result = env.execute("rocksdb")
    assert result.restarts == 1
    _check(read_sink(out_dir), exact=True)


def test_at_least_once_loses_nothing(env: Any, tmp_path: Any) -> None:
    """AT_LEAST_ONCE publishes sink output at every epoch end, so after a restore the
    replayed epochs' records are published again, but none is lost, and state stays exact.
    The fault outlasts Spark's task retries, so the job restores from a checkpoint."""
    inj = FailureInjector(str(tmp_path / "inj"), 4321, times=4)
    _configure(env, tmp_path, CheckpointingMode.AT_LEAST_ONCE)
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS, injector=inj)
    result = env.execute("at-least-once")
    assert inj.fired() == 4
    assert result.restarts == 1
    out = read_sink(out_dir)
    _check(out, exact=False)
    echoed = collections.Counter(o for o in out if o[0] == "rec")
    assert any(c > 1 for c in echoed.values()), "no epoch was published twice"
    _, finals = expected_keyed_count_output(N_EVENTS, N_KEYS)
    assert {o[1]: (o[2], o[3]) for o in out if o[0] == "final"} == finals  # exact state


def test_no_restart_strategy_fails_the_job(env: Any, tmp_path: Any) -> None:
    from sparkpoint.errors import JobExecutionError

    inj = FailureInjector(str(tmp_path / "inj"), 100, times=10)
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    env.set_restart_strategy(RestartStrategies.no_restart())
    keyed_count_job(env, str(tmp_path / "out"), N_EVENTS, N_KEYS, injector=inj)
    with pytest.raises(JobExecutionError, match="injected failure"):
        env.execute("fails")
    assert read_sink(str(tmp_path / "out")) == [] or all(
        o[0] == "rec" for o in read_sink(str(tmp_path / "out"))
    )


def test_task_retried_after_its_local_commit_does_not_apply_the_epoch_twice(
    env: Any, tmp_path: Any
) -> None:
    """A keyed task fails after it committed its state for the epoch (before Spark got its
    result); Spark's retry must undo that commit and redo the epoch, not apply it twice."""
    marker = FailureInjector(str(tmp_path / "after-commit"), at_record=3, times=1)
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    env.set_fault_injection(Faults().fail_after_local_commit(marker, "count", 1))
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    result = env.execute("after-commit")
    assert marker.fired() == 1
    assert result.restarts == 0  # Spark's task retry handled it
    _check(read_sink(out_dir), exact=True)


def _lose_state_at(tmp_path: Any, epoch: int, lost: list[int]) -> Faults:
    """Faults that delete subtask 0's local state of operator ``count`` before ``epoch``."""
    import shutil

    def lose_state(event: EpochStart) -> None:
        if event.epoch == epoch and not lost:
            (found,) = local_state_dirs(str(tmp_path / "local-state"), event.job_id, "count", 0)
            shutil.rmtree(found)
            lost.append(event.epoch)

    return Faults().on_epoch_start(lose_state)


@pytest.mark.parametrize("interval", [10, 3_600_000], ids=["checkpoint", "changelog-only"])
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_lost_local_state_restores_that_subtask_alone(
    env: Any, tmp_path: Any, backend: str, interval: int
) -> None:
    """A subtask whose local state vanished (a lost worker) reports it; that subtask alone
    restores the latest checkpoint (none with a one-hour interval) plus its changelog, the
    epoch runs again, nothing else rolls back, and the result stays exact."""
    from sparkpoint.datastream import EmbeddedRocksDBStateBackend

    lost: list[int] = []
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    env.enable_checkpointing(interval)
    if backend == "rocksdb":
        env.set_state_backend(EmbeddedRocksDBStateBackend(True))
    env.set_fault_injection(_lose_state_at(tmp_path, 4, lost))
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    result = env.execute("lost-state")
    assert lost == [4]
    assert result.restarts == 0 and result.failovers == ()
    (restore,) = result.subtask_restores
    assert (restore.epoch, restore.operator_id, restore.subtask) == (4, "count", 0)
    assert restore.cause.startswith("state lost")
    if interval > 10:  # no checkpoint yet: epochs 1-3 come from the changelog
        assert restore.changelog_entries == 3
    (epoch4,) = [e for e in result.epoch_reports if e.epoch == 4]
    assert epoch4.runs == 2
    _check(read_sink(out_dir), exact=True)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_every_epoch_but_the_one_ending_the_input_stores_changes(
    env: Any, tmp_path: Any, backend: str
) -> None:
    """Per-subtask recovery needs each epoch's changes in the changelog, except those of
    the epoch that ends the input: the job ends with it, so nothing restores to its end."""
    from sparkpoint.datastream import EmbeddedRocksDBStateBackend

    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    env.enable_checkpointing(3_600_000)
    if backend == "rocksdb":
        env.set_state_backend(EmbeddedRocksDBStateBackend(True))
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    result = env.execute("changelog-per-epoch")
    *before, last = result.epoch_reports
    assert len(before) >= 3
    assert all(r.changelog_bytes > 0 for r in before), [r.changelog_bytes for r in before]
    assert last.changelog_bytes == 0 and last.records_in > 0
    assert "changelog" in before[0].describe() and "changelog" not in last.describe()
    _check(read_sink(out_dir), exact=True)


def test_state_lost_in_the_last_epoch_restores_from_the_entries_before_it(
    env: Any, tmp_path: Any
) -> None:
    """The epoch that ends the input stores no entry of its own; a subtask that starts it
    without local state still restores alone, from the entries of every epoch before it."""
    lost: list[int] = []
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    env.enable_checkpointing(3_600_000)
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    env.set_fault_injection(_lose_state_at(tmp_path, 5, lost))
    result = env.execute("lost-state-last-epoch")
    assert lost == [5] and result.epoch_reports[-1].epoch == 5  # 2 x 3,000 in 700s
    assert result.restarts == 0 and result.failovers == ()
    (restore,) = result.subtask_restores
    assert (restore.epoch, restore.subtask, restore.changelog_entries) == (5, 0, 4)
    assert result.epoch_reports[-1].changelog_bytes == 0
    _check(read_sink(out_dir), exact=True)


def test_lost_local_state_without_changelog_fails_over(env: Any, tmp_path: Any) -> None:
    """With the changelog off, the same loss rolls the whole job back to the latest
    checkpoint, and the job reports a failover instead of a subtask restore."""
    lost: list[int] = []
    _configure(env, tmp_path, CheckpointingMode.EXACTLY_ONCE)
    env.configure({"sparkpoint.state.changelog.enabled": "false"})
    env.set_fault_injection(_lose_state_at(tmp_path, 3, lost))
    out_dir = str(tmp_path / "out")
    keyed_count_job(env, out_dir, N_EVENTS, N_KEYS)
    result = env.execute("lost-state-failover")
    assert lost == [3]
    assert result.restarts == 1 and result.subtask_restores == ()
    (failover,) = result.failovers
    assert failover.epoch == 3 and "found no local state" in failover.cause
    _check(read_sink(out_dir), exact=True)
