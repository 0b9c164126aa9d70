"""Asynchronous snapshots on local Spark: uploads run in the background while later
epochs run, checkpoints complete when every upload is acknowledged (with their own epoch
when the upload ends within sparkpoint.epoch.upload-wait), the timeout aborts a running
upload, a Python worker killed mid-upload costs that checkpoint only, concurrent
checkpoints overlap, and a backend without asynchronous snapshots uploads in the epoch."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.datastream import (
    EmbeddedRocksDBStateBackend,
    FileSystemCheckpointStorage,
    FsStateBackend,
    HashMapStateBackend,
)
from sparkpoint.testing import FailureInjector, Faults
from tests.runtime.jobs.reference import check_keyed_count_output, keyed_count_job

N_EVENTS = 6000
N_KEYS = 17


class Delay:
    """Upload hook: wait before uploading (picklable, runs in the upload thread)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, operator_id: str, subtask: int, checkpoint_id: int) -> None:
        time.sleep(self.seconds)


def _configure(env: Any, tmp_path: Path, backend: Any = None, records: int = 300) -> str:
    ckpt = tmp_path / "ckpt"
    env.enable_checkpointing(10)
    # Every snapshot is a file (none inline), so leftovers would show on disk.
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage(ckpt.as_uri(), file_state_size_threshold=0)
    )
    if backend is not None:
        env.set_state_backend(backend)
    # Uploads go on in the background (no wait at the epoch's end) unless a test waits. The
    # delays are set against epochs of Spark jobs (~0.1 s): a long-running task's epoch of
    # 0.01 s would end a bounded job before its uploads.
    env.configure(
        {
            "sparkpoint.epoch.max-records-per-split": str(records),
            "sparkpoint.epoch.upload-wait": "0",
            "sparkpoint.epoch.mode": "job",
        }
    )
    keyed_count_job(env, str(tmp_path / "out"), N_EVENTS, N_KEYS)
    return str(ckpt)


def _check_output(tmp_path: Path) -> None:
    check_keyed_count_output(str(tmp_path / "out"), N_EVENTS, N_KEYS)


def _state_files(ckpt: str) -> list[str]:
    """Files in chk-*/ and shared/ of every job under ``ckpt`` (not ``_metadata``)."""
    found = []
    for d, _, files in os.walk(ckpt):
        found.extend(os.path.join(d, f) for f in files if f != "_metadata")
    return found


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_checkpoints_complete_when_their_background_uploads_end(
    env: Any, tmp_path: Path, backend: str
) -> None:
    state = HashMapStateBackend() if backend == "heap" else EmbeddedRocksDBStateBackend(True)
    # 30 epochs: each checkpoint waits 0.3 s for its uploads, and a warm session runs an
    # epoch in well under 0.1 s, so ten epochs could end before a third one completes.
    _configure(env, tmp_path, state, records=100)
    env.set_fault_injection(Faults().on_upload(Delay(0.3)))
    result = env.execute("async")
    _check_output(tmp_path)
    completed = [s for s in result.checkpoints if s.status == "COMPLETED"]
    assert len(completed) >= 3 and result.restarts == 0
    reports = {r.epoch: r for r in result.epoch_reports}
    for stats in completed:
        trigger = reports[stats.epoch]
        assert trigger.checkpoint_id == stats.checkpoint_id
        # Uploads were still running when the triggering epoch ended.
        assert trigger.uploads_in_flight == 2
    assert sum(r.uploads_completed or 0 for r in reports.values()) >= 2 * len(completed)
    # One checkpoint at a time (max concurrent 1): no epoch triggers right after another.
    triggers = sorted(r.epoch for r in reports.values() if r.checkpoint_id is not None)
    assert all(b - a >= 2 for a, b in itertools.pairwise(triggers))


def test_an_upload_done_within_the_wait_completes_its_checkpoint_with_its_epoch(
    env: Any, tmp_path: Path
) -> None:
    """With ``sparkpoint.epoch.upload-wait`` longer than the upload, each task waits for its
    upload and reports it done: every checkpoint completes with the epoch that triggered
    it, so the next epoch may trigger the next one."""
    _configure(env, tmp_path, HashMapStateBackend(), records=100)
    env.configure({"sparkpoint.epoch.upload-wait": "5 s"})
    env.set_fault_injection(Faults().on_upload(Delay(0.2)))
    result = env.execute("upload-wait")
    _check_output(tmp_path)
    completed = [s for s in result.checkpoints if s.status == "COMPLETED"]
    assert len(completed) >= 3 and result.restarts == 0
    reports = {r.epoch: r for r in result.epoch_reports}
    for stats in completed:
        trigger = reports[stats.epoch]
        assert (trigger.uploads_in_flight, trigger.uploads_completed) == (0, 2)
    triggers = sorted(r.epoch for r in reports.values() if r.checkpoint_id is not None)
    assert any(b - a == 1 for a, b in itertools.pairwise(triggers))


def test_the_timeout_aborts_a_running_upload(env: Any, tmp_path: Path) -> None:
    ckpt = _configure(env, tmp_path)
    config = env.get_checkpoint_config()
    config.set_checkpoint_timeout(100)
    config.set_tolerable_checkpoint_failure_number(1000)
    env.set_fault_injection(Faults().on_upload(Delay(1.5)))
    result = env.execute("timeout")
    _check_output(tmp_path)
    failed = [s for s in result.checkpoints if s.status == "FAILED"]
    assert failed and all("CHECKPOINT_EXPIRED" in (s.failure or "") for s in failed)
    assert not [s for s in result.checkpoints if s.status == "COMPLETED"]
    assert result.restarts == 0
    # Expired uploads were stopped or their files deleted: nothing is left behind.
    assert _state_files(ckpt) == []


def test_a_python_worker_killed_while_uploading_costs_that_checkpoint_only(
    env: Any, tmp_path: Path
) -> None:
    ckpt = _configure(env, tmp_path)
    injector = FailureInjector(str(tmp_path / "inj"), at_record=2, times=1, mode="kill")
    env.set_fault_injection(Faults().on_upload(Delay(0.2)).fail_upload(injector))
    result = env.execute("killed-upload")
    assert injector.fired() == 1
    _check_output(tmp_path)
    [second] = [s for s in result.checkpoints if s.checkpoint_id == 2]
    assert second.status == "FAILED" and "TASK_FAILURE" in (second.failure or "")
    assert "lost" in (second.failure or "")
    assert any(s.status == "COMPLETED" and s.checkpoint_id > 2 for s in result.checkpoints)
    assert result.restarts == 0  # a lost upload is no tolerable-failure count, no failover
    assert not any(f"chk-2{os.sep}" in f for f in _state_files(ckpt))


def test_concurrent_checkpoints_overlap(env: Any, tmp_path: Path) -> None:
    _configure(env, tmp_path, EmbeddedRocksDBStateBackend(True))
    env.get_checkpoint_config().set_max_concurrent_checkpoints(2)
    env.set_fault_injection(Faults().on_upload(Delay(0.3)))
    result = env.execute("concurrent")
    _check_output(tmp_path)
    triggers = sorted(r.epoch for r in result.epoch_reports if r.checkpoint_id is not None)
    assert any(b - a == 1 for a, b in itertools.pairwise(triggers))
    completed = [s.checkpoint_id for s in result.checkpoints if s.status == "COMPLETED"]
    assert len(completed) >= 3 and completed == sorted(completed)


def test_a_backend_without_asynchronous_snapshots_uploads_within_the_epoch(
    env: Any, tmp_path: Path
) -> None:
    backend = FsStateBackend((tmp_path / "ckpt").as_uri(), using_asynchronous_snapshots=False)
    assert backend.is_using_asynchronous_snapshots() is False
    _configure(env, tmp_path, backend)
    env.set_fault_injection(Faults().on_upload(Delay(5.0)))  # never called
    result = env.execute("sync")
    _check_output(tmp_path)
    completed = [s for s in result.checkpoints if s.status == "COMPLETED"]
    assert len(completed) >= 3
    assert all(not r.uploads_in_flight and not r.uploads_completed for r in result.epoch_reports)
    # One checkpoint each epoch it is due: consecutive epochs trigger.
    triggers = sorted(r.epoch for r in result.epoch_reports if r.checkpoint_id is not None)
    assert any(b - a == 1 for a, b in itertools.pairwise(triggers))
