"""Acceptance: savepoint -> DataFrame -> savepoint -> restored job, with identical state, on
heap and RocksDB savepoints at parallelism 1 -> 4 -> 2; retained checkpoints (heap full,
RocksDB incremental) read as DataFrames; a task failure while writing leaves no file behind."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from sparkpoint.checkpoint.discovery import latest_checkpoint
from sparkpoint.checkpoint.stats import STATS_MASTER_STATE
from sparkpoint.common import Types
from sparkpoint.datastream import (
    EmbeddedRocksDBStateBackend,
    ExternalizedCheckpointRetention,
    HashMapStateBackend,
)
from sparkpoint.state_processor import OperatorTransformation, SavepointReader, SavepointWriter
from sparkpoint.testing import FailureInjector
from tests.state_processor import jobs

N_EVENTS = 6_000
N_KEYS = 37
LAST = Types.TUPLE([Types.STRING(), Types.LONG()])


def _backend(name: str) -> Any:
    if name == "heap":
        return HashMapStateBackend()
    return EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=name.endswith("incr"))


def _typed(reader: SavepointReader) -> dict[int, tuple[Any, ...]]:
    """The state read back as typed columns, per key."""
    df = reader.read_keyed_state(jobs.UID, key_type=Types.LONG(), types={"last": LAST})
    return {
        r["key"]: (
            r["count"],
            r["seen"] or [],
            dict(r["buckets"] or {}),
            tuple(r["last"]) if r["last"] is not None else None,
        )
        for r in df.collect()
    }


def _as_tuples(state: dict[int, tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    return {k: (c, s, b, last) for k, (c, s, b, last) in state.items()}


@pytest.fixture(scope="module", params=["heap", "rocksdb"])
def original(request: Any, spark: Any, tmp_path_factory: Any) -> tuple[str, str, dict]:
    """A savepoint of ``StatefulEcho`` at parallelism 1, and the state it must hold."""
    tmp = str(tmp_path_factory.mktemp(f"original-{request.param}"))
    env = jobs.make_env(spark, tmp, 1, _backend(request.param))
    jobs.stateful_job(env, os.path.join(tmp, "out"), N_EVENTS, N_KEYS)
    savepoint = jobs.stop_with_savepoint_after(env, 4)
    records = jobs.echoed(os.path.join(tmp, "out"))
    assert 0 < len(records) < N_EVENTS  # stopped midway
    return request.param, savepoint, jobs.expected_state(records)


def test_round_trip_1_4_2_restores_identical_state(
    original: Any, spark: Any, tmp_path: Any
) -> None:
    backend, savepoint, expected = original
    reader = SavepointReader.read(spark, savepoint)
    (op,) = reader.operators()
    assert (op.uid, op.parallelism, op.max_parallelism, op.state_format) == (
        jobs.UID,
        1,
        128,
        "savepoint",
    )
    assert {s.name for s in reader.state_infos(jobs.UID)} == {"count", "seen", "buckets", "last"}
    assert _typed(reader) == expected

    # DataFrame -> savepoint at parallelism 4 (untyped state and keys as read: pickle bytes)
    df = reader.read_keyed_state(jobs.UID)
    target = str(tmp_path / "written")
    writer = SavepointWriter.from_existing_savepoint(spark, savepoint).remove_operator(jobs.UID)
    writer.with_operator(
        jobs.UID,
        OperatorTransformation.bootstrap_with(df)
        .key_by("key")
        .transform(*reader.state_infos(jobs.UID), parallelism=4),
    )
    assert writer.write(target, file_state_size_threshold=0) == target
    files = sorted(os.listdir(target))
    assert len(files) == 5 and "_metadata" in files  # one stream file per subtask
    written = SavepointReader.read(spark, target)
    (op,) = written.operators()
    assert (op.parallelism, op.max_parallelism, op.subtasks_with_state) == (4, 128, 4)
    # The writer keeps the job's master state; the statistics described the original only.
    assert written.snapshot.metadata.master_states == tuple(
        m for m in reader.snapshot.metadata.master_states if m.name != STATS_MASTER_STATE
    )
    assert _typed(written) == expected

    # savepoint -> job at parallelism 2, on the same backend: it sees exactly that state
    env = jobs.make_env(
        spark,
        str(tmp_path / "restored"),
        2,
        _backend(backend),
        restore=target,
        epoch_records=100_000,
    )
    absent = 10**6
    got = jobs.emit_state_job(env, [*sorted(expected), absent])
    assert len(got) == len(expected) + 1
    by_key = {g[0]: g[1:] for g in got}
    assert by_key.pop(absent) == (None, [], {}, None)
    assert _as_tuples(by_key) == expected


@pytest.mark.parametrize("backend", ["heap", "rocksdb-incr"])
def test_retained_checkpoint_reads_as_dataframe(backend: str, spark: Any, tmp_path: Any) -> None:
    tmp = str(tmp_path)
    env = jobs.make_env(spark, tmp, 2, _backend(backend))
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    jobs.stateful_job(env, os.path.join(tmp, "out"), N_EVENTS * 5, N_KEYS)
    client = env.execute_async("retained")
    master = client.job_master
    while len([s for s in client.get_checkpoint_statistics() if s.status == "COMPLETED"]) < 3:
        assert not client.get_job_execution_result().done()
        time.sleep(0.05)
    client.cancel().result(timeout=120)
    client.wait(timeout=120)
    latest = latest_checkpoint(os.path.join(tmp, "ckpt", master.job_id))
    assert latest is not None
    reader = SavepointReader.read(spark, latest.path)
    (op,) = reader.operators()
    kind = "incremental checkpoint" if backend == "rocksdb-incr" else "full checkpoint"
    assert (op.parallelism, op.state_format) == (2, kind)
    expected = jobs.expected_state(jobs.echoed(os.path.join(tmp, "out")))
    assert expected and _typed(reader) == expected


def test_failed_write_task_is_retried_and_leaves_no_file(
    original: Any, spark: Any, tmp_path: Any
) -> None:
    _, savepoint, expected = original
    reader = SavepointReader.read(spark, savepoint)
    injector = FailureInjector(str(tmp_path / "fired"), at_record=2)
    writer = SavepointWriter.new_savepoint(spark, 64)
    writer.after_subtask_write = injector.maybe_fail
    writer.with_operator(
        jobs.UID,
        OperatorTransformation.bootstrap_with(reader.read_keyed_state(jobs.UID))
        .key_by("key")
        .transform(*reader.state_infos(jobs.UID), parallelism=3),
    )
    target = writer.write(str(tmp_path / "sp"), file_state_size_threshold=0)
    assert injector.fired() == 1  # subtask 2 failed once after writing its file
    assert sorted(os.listdir(target)) == sorted(
        [
            "_metadata",
            *(
                os.path.basename(h.delegate.path)
                for s in SavepointReader.read(spark, target)
                .snapshot.metadata.operator_states[0]
                .subtask_states.values()
                for h in s.managed_keyed_state
            ),
        ]
    )
    assert len(os.listdir(target)) == 4
    assert _typed(SavepointReader.read(spark, target)) == expected
