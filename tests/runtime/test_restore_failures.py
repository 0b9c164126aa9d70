"""A snapshot that cannot be restored (issue 29, item 5): the error names the state file,
the operator and the subtask, and the job fails after ``sparkpoint.restart.restore-attempts``
restores of that snapshot under the default restart strategy (which alone would restart
forever), instead of restarting without end. The snapshot is a real retained checkpoint of a
keyed job on the heap backend with every state file on disk; one subtask's file is cut in
the middle of its last key group."""

from __future__ import annotations

import logging
import os
import re
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.discovery import load_pointer
from sparkpoint.checkpoint.handles import FileStateHandle, KeyGroupsStateHandle
from sparkpoint.common import Configuration, Encoder, JobStatus
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import (
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    HashMapStateBackend,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
)
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.errors import JobExecutionError
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.typeinfo import Types
from tests.runtime.jobs.reference import keyed_count_job, run_until_checkpoints

pytestmark = pytest.mark.spark

_BLOCK = struct.Struct(">iI")  # a key group block's header: key group, length


def _env(spark: Any, tmp_path: Path, name: str, **conf: str) -> Any:
    config = Configuration()
    config.set_string("sparkpoint.epoch.max-records-per-split", "500")
    config.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    # ckpt-b restores a snapshot of ckpt-a, not its own: the test vouches for it, so its
    # sink commits are redone and its state is what fails (docs/storage.md).
    config.set_string("sparkpoint.snapshot.allow-pickle", "true")
    for key, value in conf.items():
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config, spark=spark)
    env.set_parallelism(2)
    env.set_state_backend(HashMapStateBackend())
    env.enable_checkpointing(10)
    checkpoints = env.get_checkpoint_config()
    checkpoints.set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / name), file_state_size_threshold=0)
    )
    checkpoints.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    keyed_count_job(env, str(tmp_path / "out"), 40_000, 17)
    return env


def _truncate_last_key_group(pointer: str) -> tuple[str, str, int, str]:
    """Cut subtask 0's state file of the keyed operator in the middle of its last key group;
    returns the file, the operator id, the subtask and the reader's error for the cut (the
    file's length no longer matches the one its handle records next to its digest)."""
    metadata, _ = load_pointer(pointer)
    op = next(o for o in metadata.operator_states if o.subtask_states[0].managed_keyed_state)
    (handle,) = op.subtask_states[0].managed_keyed_state
    assert isinstance(handle, KeyGroupsStateHandle)
    assert isinstance(handle.delegate, FileStateHandle)
    path = handle.delegate.path
    kg, offset = [(k, o) for k, o in handle.group_range_offsets.items() if o >= 0][-1]
    data = Path(path).read_bytes()
    found, size = _BLOCK.unpack_from(data, offset)
    assert found == kg and size > 2
    keep = size // 2
    cut = offset + _BLOCK.size + keep
    Path(path).write_bytes(data[:cut])
    error = (
        f"State file {path} has {cut} bytes, but its checkpoint metadata records {len(data)}: "
        "the file was truncated or replaced"
    )
    return path, op.operator_id, 0, error


def test_an_unrestorable_snapshot_fails_the_job_after_three_attempts(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    done = run_until_checkpoints(_env(spark, tmp_path, "ckpt-a"), 1, "restore-failures-a")
    pointer = next(s.external_pointer for s in reversed(done) if Path(s.external_pointer).exists())
    path, operator_id, subtask, error = _truncate_last_key_group(pointer)

    caplog.set_level(logging.INFO, logger="sparkpoint.job")
    env = _env(spark, tmp_path, "ckpt-b", **{"execution.state-recovery.path": pointer})
    client = env.execute_async("restore-failures-b")
    with pytest.raises(JobExecutionError) as info:
        client.get_job_execution_result().result(timeout=300)
    message = str(info.value)
    cause = (
        rf"{re.escape(error)} \(subtask {subtask} of operator '[^']+' \(uid 'count', id "
        rf"{operator_id}\), restoring from state files {re.escape(path)}; CorruptStateError\)"
    )
    assert re.fullmatch(
        rf"Job 'restore-failures-b' \(\w+\) failed: restoring {re.escape(pointer)} failed 3 "
        rf"times \(sparkpoint\.restart\.restore-attempts = 3\); the last error: {cause}",
        message,
    ), message
    attempts = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(f"Job {client.get_job_id()}: restoring {pointer} failed")
    ]
    assert [re.search(r"\((\d) of 3 attempts\)", m).group(1) for m in attempts] == ["1", "2", "3"]
    assert all(re.search(cause, m) for m in attempts)
    assert client.job_master.progress.restarts == 2
    assert client.get_job_status().result() is JobStatus.FAILED


def test_the_number_of_attempts_is_configured(spark: Any, tmp_path: Path) -> None:
    done = run_until_checkpoints(_env(spark, tmp_path, "ckpt-a"), 1, "restore-failures-c")
    pointer = next(s.external_pointer for s in reversed(done) if Path(s.external_pointer).exists())
    _truncate_last_key_group(pointer)
    env = _env(
        spark,
        tmp_path,
        "ckpt-b",
        **{
            "execution.state-recovery.path": pointer,
            "sparkpoint.restart.restore-attempts": "1",
        },
    )
    client = env.execute_async("restore-failures-d")
    with pytest.raises(JobExecutionError, match=r"failed 1 times \(sparkpoint\.restart"):
        client.get_job_execution_result().result(timeout=300)
    assert client.job_master.progress.restarts == 0
    assert client.get_job_status().result() is JobStatus.FAILED


class _HangsWhenMarked(KeyedProcessFunction):
    """Counts per key; hangs (as a crafted snapshot's state could make a restore hang)
    while the file ``marker`` exists."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if os.path.exists(self.marker):
            time.sleep(3600)
        self.count.update((self.count.value() or 0) + 1)
        yield value


def _hanging_env(spark: Any, tmp_path: Path, **conf: str) -> Any:
    config = Configuration()
    config.set_string("sparkpoint.epoch.max-records-per-split", "500")
    config.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    for key, value in conf.items():
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(10)
    checkpoints = env.get_checkpoint_config()
    checkpoints.set_checkpoint_storage(FileSystemCheckpointStorage(str(tmp_path / "ckpt")))
    checkpoints.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    (
        env.from_source(NumberSequenceSource(0, 40_000), None, "numbers")
        .uid("numbers")
        .key_by(lambda x: x % 7)
        .process(_HangsWhenMarked(str(tmp_path / "hang")))
        .uid("count")
        .sink_to(
            FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
        )
        .uid("sink")
    )
    return env


def test_a_restore_that_hangs_its_worker_counts_against_the_attempts(
    spark: Any, tmp_path: Path
) -> None:
    """The watchdog ends the hanging worker after restore-timeout; the crash counts against
    the snapshot, so the job fails after restore-attempts instead of hanging or restarting
    forever under the default restart strategy."""
    done = run_until_checkpoints(_hanging_env(spark, tmp_path), 1, "restore-hangs-a")
    pointer = next(s.external_pointer for s in reversed(done) if Path(s.external_pointer).exists())
    (tmp_path / "hang").write_text("")
    env = _hanging_env(
        spark,
        tmp_path,
        **{
            "execution.state-recovery.path": pointer,
            "sparkpoint.restart.restore-timeout": "2 s",
            "sparkpoint.restart.restore-attempts": "2",
        },
    )
    started = time.monotonic()
    client = env.execute_async("restore-hangs-b")
    with pytest.raises(JobExecutionError) as info:
        client.get_job_execution_result().result(timeout=300)
    assert str(info.value).startswith(
        f"Job 'restore-hangs-b' ({client.get_job_id()}) failed: restoring {pointer} failed 2 "
        "times (sparkpoint.restart.restore-attempts = 2); the last error: Python worker exited "
        "unexpectedly (crashed): "
    ), str(info.value)
    assert client.job_master.progress.restarts == 1
    assert time.monotonic() - started < 240
