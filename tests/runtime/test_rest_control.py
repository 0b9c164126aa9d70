"""Control of a running job from outside its process (issue 40, item 3) on local Spark: with
``sparkpoint.rest.enabled`` the ``sparkpoint`` command lists the job, takes a savepoint,
stops it with a savepoint (drained and committed as ``JobClient.stop_with_savepoint``), the
job resumes from it with exact output, and a second job is cancelled."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.cli.main import main
from sparkpoint.common import Configuration
from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
from tests.runtime.jobs.reference import check_keyed_count_output, keyed_count_job

N_EVENTS = 30_000
N_KEYS = 11

pytestmark = pytest.mark.spark


def _env(spark: Any, tmp_path: Path, restore: str | None = None, split: int = 500) -> Any:
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(split))
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    conf.set_string("sparkpoint.rest.enabled", "true")
    conf.set_string("sparkpoint.rest.jobs-dir", str(tmp_path / "jobs"))
    if restore is not None:
        conf.set_string("execution.savepoint.path", restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / "ckpt"), savepoint_path=str(tmp_path / "sp"))
    )
    return env


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_list_savepoint_stop_resume_and_cancel_from_the_command_line(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = ("--jobs-dir", str(tmp_path / "jobs"))
    out = str(tmp_path / "out")
    env = _env(spark, tmp_path)
    keyed_count_job(env, out, N_EVENTS, N_KEYS)
    client = env.execute_async("rest-controlled")
    master = client.job_master
    while master.progress.epochs_run < 3:
        assert not client.get_job_execution_result().done()
        time.sleep(0.05)
    job_id = client.get_job_id()
    listed = _cli(capsys, "list", *jobs)
    assert f"{job_id}  RUNNING" in listed and "rest-controlled" in listed

    taken = _cli(capsys, "savepoint", job_id, str(tmp_path / "sp-taken"), *jobs)
    path = taken.splitlines()[-1].removeprefix("Savepoint completed. Path: ")
    assert os.path.exists(os.path.join(path, "_metadata"))

    stopped = _cli(capsys, "stop", "--savepoint-path", str(tmp_path / "sp-stop"), job_id, *jobs)
    stop_path = stopped.splitlines()[-1].removeprefix("Savepoint completed. Path: ")
    client.wait(timeout=120)
    assert master.status == "FINISHED"
    assert stop_path.startswith(str(tmp_path / "sp-stop"))
    assert os.path.exists(os.path.join(stop_path, "_metadata"))
    assert not (tmp_path / "jobs" / f"{job_id}.json").exists()  # removed with the job

    env = _env(spark, tmp_path, restore=stop_path, split=10_000)
    keyed_count_job(env, out, N_EVENTS, N_KEYS)
    env.execute("rest-resumed")
    check_keyed_count_output(out, N_EVENTS, N_KEYS)

    env = _env(spark, tmp_path)
    keyed_count_job(env, str(tmp_path / "out2"), N_EVENTS * 10, N_KEYS)
    client = env.execute_async("rest-cancelled")
    while client.job_master.progress.epochs_run < 2:
        time.sleep(0.05)
    assert _cli(capsys, "cancel", client.get_job_id(), *jobs) == (
        f"Cancelled job {client.get_job_id()}.\n"
    )
    client.get_job_execution_result().exception(120)
    assert client.job_master.status == "CANCELED"
