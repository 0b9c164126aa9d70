"""Savepoints: stop-with-savepoint, resume with another parallelism (2 -> 3 -> 1), trigger
savepoints on a running job, cancel; a 16-subtask checkpoint that is one file; and
savepoints that fail (the request fails, the job goes on or, after a drain, fails over)."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

import pytest

from sparkpoint.common import Configuration, JobStatus
from sparkpoint.datastream import (
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    StreamExecutionEnvironment,
)
from sparkpoint.errors import CheckpointException, CheckpointFailureReason
from sparkpoint.testing import Faults
from tests.runtime.jobs.reference import check_keyed_count_output, keyed_count_job, read_sink

N_EVENTS = 30_000
N_KEYS = 11


def _env(
    spark: Any, tmp_path: Any, parallelism: int, restore: str | None = None, split: int = 500
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
    return env


def _stop_after(env: Any, epochs: int) -> str:
    client = env.execute_async("savepoints")
    master = client.job_master
    while master.progress.epochs_run < epochs:
        assert not client.get_job_execution_result().done(), "job ended before the stop"
        time.sleep(0.05)
    path = client.stop_with_savepoint(False).result(timeout=120)
    client.wait(timeout=120)
    assert master.status == "FINISHED"
    return str(path)


def test_savepoint_resume_with_parallelism_2_3_1(spark: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    env = _env(spark, tmp_path, 2)
    keyed_count_job(env, out, N_EVENTS, N_KEYS)
    sp1 = _stop_after(env, 4)
    assert os.path.basename(sp1).startswith("savepoint-")
    assert os.path.exists(os.path.join(sp1, "_metadata"))

    env = _env(spark, tmp_path, 3, restore=sp1)
    keyed_count_job(env, out, N_EVENTS, N_KEYS)
    sp2 = _stop_after(env, 4)

    # the rest of the input in a few large epochs (records per epoch are a driver setting)
    env = _env(spark, tmp_path, 1, restore=sp2, split=10_000)
    keyed_count_job(env, out, N_EVENTS, N_KEYS)
    env.execute("savepoints-final")

    check_keyed_count_output(out, N_EVENTS, N_KEYS)


def test_trigger_savepoint_and_cancel(spark: Any, tmp_path: Any) -> None:
    env = _env(spark, tmp_path, 2)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    keyed_count_job(env, str(tmp_path / "out"), N_EVENTS * 10, N_KEYS)
    client = env.execute_async("cancel-me")
    master = client.job_master
    while master.progress.epochs_run < 3:
        time.sleep(0.05)
    path = client.trigger_savepoint(str(tmp_path / "sp2")).result(timeout=120)
    assert os.path.exists(os.path.join(path, "_metadata"))
    client.cancel().result(timeout=120)
    client.wait(timeout=120)
    assert master.status == "CANCELED"
    # RETAIN_ON_CANCELLATION keeps the latest checkpoint; the savepoint is never discarded.
    job_dir = tmp_path / "ckpt" / master.job_id
    assert any(
        (job_dir / d / "_metadata").exists() for d in os.listdir(job_dir) if d.startswith("chk-")
    )
    assert os.path.exists(os.path.join(path, "_metadata"))


def test_sixteen_subtasks_small_state_is_one_file(spark: Any, tmp_path: Any) -> None:
    env = _env(spark, tmp_path, 16)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    keyed_count_job(env, str(tmp_path / "out"), 160_000, 64)
    client = env.execute_async("sixteen")
    master = client.job_master
    while not [s for s in client.get_checkpoint_statistics() if s.status == "COMPLETED"]:
        assert not client.get_job_execution_result().done()
        time.sleep(0.05)
    client.cancel().result(timeout=120)
    client.wait(timeout=120)
    job_dir = tmp_path / "ckpt" / master.job_id
    chks = [d for d in os.listdir(job_dir) if d.startswith("chk-")]
    assert chks
    for d in chks:
        assert sorted(os.listdir(job_dir / d)) == ["_metadata"]
    done = [s for s in client.get_checkpoint_statistics() if s.status == "COMPLETED"]
    assert done[0].files_written == 0 and done[0].inline_bytes > 0


def test_stop_with_savepoint_and_drain_fires_event_time_timers(spark: Any, tmp_path: Any) -> None:
    """``stop_with_savepoint(True)`` advances the watermark to the end before the last
    savepoint: every key's end-of-input timer fires, and the job finishes."""
    out = str(tmp_path / "out")
    env = _env(spark, tmp_path, 2)
    keyed_count_job(env, out, N_EVENTS * 10, N_KEYS)
    client = env.execute_async("drain")
    master = client.job_master
    while master.progress.epochs_run < 3:
        time.sleep(0.05)
    assert client.get_job_status().result() is JobStatus.RUNNING
    path = client.stop_with_savepoint(True).result(timeout=120)
    client.wait(timeout=120)
    assert client.get_job_status().result() is JobStatus.FINISHED
    assert os.path.exists(os.path.join(path, "_metadata"))
    got = read_sink(out)
    finals = {o[1]: (o[2], o[3]) for o in got if o[0] == "final"}
    echoed = [o for o in got if o[0] == "rec"]
    assert len(finals) == N_KEYS  # drained: the end-of-input timers fired
    assert sum(c for c, _ in finals.values()) == len(echoed) < N_EVENTS * 10


def test_keyed_state_of_format_version_1_is_refused_with_its_way_out(
    spark: Any, tmp_path: Any
) -> None:
    """Version 1 of _metadata put keys in Java Flink's key groups (no Row.of(key)): its keyed
    state is refused by a restore and by a writer keeping it, with the reason and the way."""
    from sparkpoint.checkpoint.metadata.file_format import (
        load_checkpoint_metadata,
        store_checkpoint_metadata,
    )
    from sparkpoint.checkpoint.origin import ORIGIN_KEY_FILE
    from sparkpoint.errors import RestoreError
    from sparkpoint.state_processor import SavepointWriter

    env = _env(spark, tmp_path, 2)
    keyed_count_job(env, str(tmp_path / "out"), N_EVENTS, N_KEYS)
    savepoint = _stop_after(env, 3)
    path = os.path.join(savepoint, "_metadata")
    with open(path, "rb") as f:
        metadata = load_checkpoint_metadata(f.read(), savepoint, path)
    assert metadata.format_version == 2
    # Re-signed with the checkpoint directory's origin key: still the job's own savepoint,
    # so its pending commits are redone and the key groups are what is refused.
    origin = (tmp_path / "ckpt" / ORIGIN_KEY_FILE).read_bytes().strip()
    with open(path, "wb") as f:
        f.write(store_checkpoint_metadata(metadata, version=1, signing_key=origin))

    env = _env(spark, tmp_path, 2, restore=savepoint)
    # the same sink directory: the savepoint's pending commits are this sink's
    keyed_count_job(env, str(tmp_path / "out"), N_EVENTS, N_KEYS)
    with pytest.raises(RestoreError, match="format version 1") as info:
        env.execute("old-key-groups")
    assert "SavepointReader" in str(info.value)

    writer = SavepointWriter.from_existing_savepoint(spark, savepoint)
    with pytest.raises(ValueError, match="format version 1, whose key groups are not"):
        writer.write(str(tmp_path / "rewritten"))


def _started(env: Any, out: str, name: str) -> Any:
    """The keyed count running, three epochs in."""
    keyed_count_job(env, out, N_EVENTS, N_KEYS)
    client = env.execute_async(name)
    while client.job_master.progress.epochs_run < 3:
        assert not client.get_job_execution_result().done(), "job ended before the request"
        time.sleep(0.05)
    return client


@pytest.mark.parametrize("kind", ["trigger", "stop", "stop-drain"])
def test_savepoint_that_cannot_be_triggered_fails_its_request_alone(
    spark: Any, tmp_path: Any, kind: str
) -> None:
    """A savepoint whose directory cannot be created (its parent is a file) fails its
    future with the reason and the path; the job neither stops, drains nor fails over, and
    runs to the end of its input with exact output (Flink: a failed savepoint leaves the
    job running)."""
    out = str(tmp_path / "out")
    client = _started(_env(spark, tmp_path, 2), out, "bad-savepoint")
    (tmp_path / "blocker").write_text("")
    target = str(tmp_path / "blocker" / "sp")
    if kind == "trigger":
        future = client.trigger_savepoint(target)
    else:
        future = client.stop_with_savepoint(kind == "stop-drain", target)
    with pytest.raises(CheckpointException, match="blocker/sp") as failure:
        future.result(timeout=120)
    assert failure.value.reason is CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE
    client.wait(timeout=300)
    master = client.job_master
    assert client.get_job_status().result() is JobStatus.FINISHED
    assert master.progress.restarts == 0 and client.get_failovers() == []
    failed = [s for s in client.get_checkpoint_statistics() if s.status == "FAILED"]
    assert [s.is_savepoint for s in failed] == [True]
    assert failed[0].failure.startswith("TRIGGER_CHECKPOINT_FAILURE: ")
    check_keyed_count_output(out, N_EVENTS, N_KEYS)


def test_stop_with_drain_whose_savepoint_fails_fails_over(spark: Any, tmp_path: Any) -> None:
    """A stop with drain whose savepoint fails once the epoch has fired every timer: the
    future has the error, and the job restores from its latest checkpoint (a failover, not
    a finish: the drained state is no point to go on from), runs to the end of its input,
    and its output is exact."""
    savepoints = tmp_path / "sp"
    blocked: list[int] = []

    def block_savepoint(event: Any) -> None:
        # Runs on the driver after the trigger created the savepoint's directory: a file in
        # its place makes writing its _metadata fail (the small state is inline).
        for d in savepoints.glob("savepoint-*"):
            if d.is_dir():
                shutil.rmtree(d)
                d.write_text("")
                blocked.append(event.epoch)

    env = _env(spark, tmp_path, 2)
    env.set_fault_injection(Faults().on_epoch_start(block_savepoint))
    out = str(tmp_path / "out")
    client = _started(env, out, "drain-fails")
    with pytest.raises(CheckpointException) as failure:
        client.stop_with_savepoint(True).result(timeout=120)
    assert failure.value.reason is CheckpointFailureReason.IO_EXCEPTION
    client.wait(timeout=300)
    assert len(blocked) == 1
    assert client.get_job_status().result() is JobStatus.FINISHED
    (failover,) = client.get_failovers()
    assert failover.epoch == blocked[0]
    assert "savepoint of a stop with drain failed" in failover.cause
    check_keyed_count_output(out, N_EVENTS, N_KEYS)
