"""Savepoints: stop-with-savepoint, resume with another parallelism (2 -> 3 -> 1), trigger
savepoints on a running job, cancel; and a 16-subtask checkpoint that is one file."""

from __future__ import annotations

import os
import time
from typing import Any

from sparkpoint.common import Configuration
from sparkpoint.datastream import (
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    StreamExecutionEnvironment,
)
from tests.runtime.jobs import check_keyed_count_output, keyed_count_job, read_sink

N_EVENTS = 30_000
N_KEYS = 11


def _env(spark: Any, tmp_path: Any, parallelism: int, restore: str | None = None) -> Any:
    conf = Configuration()
    conf.set_string("sparkpoint.epoch.max-records-per-split", "500")
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
    while master.epochs_run < epochs:
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

    env = _env(spark, tmp_path, 1, restore=sp2)
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
    while master.epochs_run < 3:
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
    done = [s for s in master.coordinator.stats if s.status == "COMPLETED"]
    assert done[0].files_written == 0 and done[0].inline_bytes > 0


def test_stop_with_savepoint_and_drain_fires_event_time_timers(spark: Any, tmp_path: Any) -> None:
    """``stop_with_savepoint(True)`` advances the watermark to the end before the last
    savepoint: every key's end-of-input timer fires, and the job finishes."""
    out = str(tmp_path / "out")
    env = _env(spark, tmp_path, 2)
    keyed_count_job(env, out, N_EVENTS * 10, N_KEYS)
    client = env.execute_async("drain")
    master = client.job_master
    while master.epochs_run < 3:
        time.sleep(0.05)
    assert client.get_job_status().result() == "RUNNING"
    path = client.stop_with_savepoint(True).result(timeout=120)
    client.wait(timeout=120)
    assert client.get_job_status().result() == "FINISHED"
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
    import pytest

    from sparkpoint.checkpoint.metadata_format import (
        load_checkpoint_metadata,
        store_checkpoint_metadata,
    )
    from sparkpoint.errors import RestoreError
    from sparkpoint.state_processor import SavepointWriter

    env = _env(spark, tmp_path, 2)
    keyed_count_job(env, str(tmp_path / "out"), N_EVENTS, N_KEYS)
    savepoint = _stop_after(env, 3)
    path = os.path.join(savepoint, "_metadata")
    with open(path, "rb") as f:
        metadata = load_checkpoint_metadata(f.read(), savepoint, path)
    assert metadata.format_version == 2
    with open(path, "wb") as f:
        f.write(store_checkpoint_metadata(metadata, version=1))

    env = _env(spark, tmp_path, 2, restore=savepoint)
    keyed_count_job(env, str(tmp_path / "out-2"), N_EVENTS, N_KEYS)
    with pytest.raises(RestoreError, match="format version 1") as info:
        env.execute("old-key-groups")
    assert "SavepointReader" in str(info.value)

    writer = SavepointWriter.from_existing_savepoint(spark, savepoint)
    with pytest.raises(ValueError, match="format version 1, whose key groups are not"):
        writer.write(str(tmp_path / "rewritten"))
