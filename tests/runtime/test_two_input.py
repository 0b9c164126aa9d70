"""Two-input operators (connect + KeyedCoProcessFunction) with keyed state and timers on
both inputs: exact results under injected failures and after savepoint -> restore at
another parallelism (both inputs' keyed state rescaled)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sparkpoint.common import Configuration, RestartStrategies
from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
from sparkpoint.testing import FailureInjector
from tests.runtime.jobs.reference import (
    expected_joined_with_own_totals,
    expected_two_input_output,
    joined_with_own_totals_job,
    read_sink,
    two_input_job,
)

N_FIRST = 2500
N_SECOND = 3100
N_KEYS = 13


def _env(
    spark: Any, tmp_path: Any, parallelism: int, restore: str | None = None, split: int = 400
) -> Any:
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(split))
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / "ckpt"), savepoint_path=str(tmp_path / "sp"))
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    return env


def _check(out_dir: str, n_first: int = N_FIRST, n_second: int = N_SECOND) -> None:
    echoed, finals = expected_two_input_output(n_first, n_second, N_KEYS)
    out = read_sink(out_dir)
    assert sorted(o for o in out if o[0] in ("a", "b")) == echoed  # none lost, none twice
    final_rows = [o for o in out if o[0] == "final"]
    assert len(final_rows) == N_KEYS
    assert {o[1]: (o[2], o[3]) for o in final_rows} == finals
    assert sorted(read_sink(out_dir + "-side")) == [("side", x) for x in range(n_second)]


@pytest.mark.parametrize("times", [1, 4], ids=["spark-retry", "job-restore"])
def test_keyed_co_process_exact_under_failures(spark: Any, tmp_path: Any, times: int) -> None:
    """A failure in process_element2 is absorbed by Spark's retry (once) or by a restore
    from the latest checkpoint (four times): state, timers and both outputs stay exact."""
    inj = FailureInjector(str(tmp_path / "inj"), N_SECOND // 2 + 7, times=times)
    env = _env(spark, tmp_path, 2)
    out = str(tmp_path / "out")
    two_input_job(env, out, N_FIRST, N_SECOND, N_KEYS, injector=inj)
    result = env.execute("two-input-failures")
    assert inj.fired() == times
    assert result.restarts == (1 if times == 4 else 0)
    _check(out)


@pytest.mark.parametrize("times", [1, 4], ids=["spark-retry", "job-restore"])
def test_a_stream_connected_with_its_own_keyed_result_is_exact_under_failures(
    spark: Any, tmp_path: Any, times: int
) -> None:
    """The numbers connected with their keys' running totals (a keyed reduce of the same
    numbers): each upstream gets a shuffle of its own, the connected operator reads both.
    Under a retried task or a job restore every number is echoed once and every key sees
    each of its running totals once, the last being its sum."""
    n, keys = 3000, 7
    inj = FailureInjector(str(tmp_path / "inj"), n // 2 + 3, times=times)
    env = _env(spark, tmp_path, 2)
    out = str(tmp_path / "out")
    joined_with_own_totals_job(env, out, n, keys, injector=inj)
    result = env.execute("joined-with-own-totals")
    assert inj.fired() == times
    assert result.restarts == (1 if times == 4 else 0)
    echoed, finals = expected_joined_with_own_totals(n, keys)
    rows = read_sink(out)
    assert sorted(o for o in rows if o[0] == "a") == echoed
    assert {o[1]: o[2:] for o in rows if o[0] == "final"} == finals
    assert len([o for o in rows if o[0] == "final"]) == keys


def _stop_after(env: Any, epochs: int) -> str:
    client = env.execute_async("two-input-savepoint")
    master = client.job_master
    while master.progress.epochs_run < epochs:
        assert not client.get_job_execution_result().done(), "job ended before the stop"
        time.sleep(0.05)
    path = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    assert master.status == "FINISHED"
    return str(path)


def test_keyed_co_process_savepoint_restore_at_other_parallelism(spark: Any, tmp_path: Any) -> None:
    """Stop with a savepoint at parallelism 2, resume at 3: every key's count (first input)
    and sum (second input) continue from the savepoint, and the timers fire once."""
    n_first, n_second = 10 * N_FIRST, 10 * N_SECOND
    out = str(tmp_path / "out")
    env = _env(spark, tmp_path, 2)
    two_input_job(env, out, n_first, n_second, N_KEYS)
    sp = _stop_after(env, 3)
    before = read_sink(out)
    assert before and not any(o[0] == "final" for o in before)  # stopped mid-input

    # the rest of the input in a few large epochs (records per epoch are a driver setting)
    env = _env(spark, tmp_path, 3, restore=sp, split=10_000)
    two_input_job(env, out, n_first, n_second, N_KEYS)
    env.execute("two-input-resumed")
    _check(out, n_first, n_second)
