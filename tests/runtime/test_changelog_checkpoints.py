"""Changelog checkpoints (``state.backend.changelog.enabled``, Flink's FLIP-158): a checkpoint
references the latest materialization plus the changes of every epoch since.

Real jobs on heap and incremental RocksDB state: what the checkpoints reference and write,
a restore at another parallelism and a failover from such a checkpoint (exact output), the
state processor reading one, and a job directory that holds exactly the files its retained
checkpoints reference while materializations come and go."""

from __future__ import annotations

import collections
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.audit import audit_checkpoint_directory
from sparkpoint.checkpoint.discovery import load_pointer
from sparkpoint.checkpoint.handles import (
    ChangelogStateBackendHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
)
from sparkpoint.common import Configuration, RestartStrategies
from sparkpoint.datastream import (
    EmbeddedRocksDBStateBackend,
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    HashMapStateBackend,
    StreamExecutionEnvironment,
)
from sparkpoint.errors import ConfigurationError
from sparkpoint.testing import FailureInjector, Faults
from tests.runtime.jobs.reference import (
    check_keyed_count_output,
    keyed_count_job,
    read_sink,
    run_until_checkpoints,
)

N_EVENTS = 30_000
N_KEYS = 17
BACKENDS = ["hashmap", "rocksdb"]
# Records per source split and epoch: small epochs while checkpoints are counted, large ones
# for the rest of the input after a restore (what is asserted there is the exact output).
SPLIT = 500
RESUMED_SPLIT = 10_000
# 16 epochs of 1,000 records: enough checkpoints on both sides of a fault in epoch 12 or 13.
SHORT_RUN = 16_000


def _env(
    spark: Any,
    tmp_path: Path,
    name: str,
    backend: str,
    parallelism: int = 2,
    restore: str | None = None,
    materialize: str = "1 h",
    injector: FailureInjector | None = None,
    n_events: int = N_EVENTS,
    retained: int = 3,
    upload_rate: str | None = None,
    split: int = SPLIT,
    spark_job_epochs: bool = False,
) -> Any:
    conf = Configuration()
    if spark_job_epochs:
        # Epochs of a Spark job each (~0.1 s): the background materializations the test
        # follows take several of them, as they take several epochs of a real job; epochs
        # in long-running tasks (~10 ms here) would end the test's run before one is adopted.
        conf.set_string("sparkpoint.epoch.mode", "job")
    conf.set_string("sparkpoint.epoch.max-records-per-split", str(split))
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    conf.set_string("execution.checkpointing.num-retained", str(retained))
    conf.set_string("state.backend.changelog.periodic-materialize.interval", materialize)
    if upload_rate is not None:
        conf.set_string("sparkpoint.state.changelog.materialization.max-upload-rate", upload_rate)
    if restore is not None:
        conf.set_string("execution.state-recovery.path", restore)
        # A snapshot of another checkpoint directory (ckpt-a) is not this job's own: the
        # test vouches for it, so its sink commits are redone (docs/storage.md).
        conf.set_string("sparkpoint.snapshot.allow-pickle", "true")
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.enable_changelog_state_backend(True)
    env.set_parallelism(parallelism)
    env.set_state_backend(
        EmbeddedRocksDBStateBackend(True) if backend == "rocksdb" else HashMapStateBackend()
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.enable_checkpointing(10)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(
        FileSystemCheckpointStorage(str(tmp_path / name), file_state_size_threshold=0)
    )
    config.set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    keyed_count_job(env, str(tmp_path / "out"), n_events, N_KEYS, injector=injector)
    return env


def _run_until(env: Any, checkpoints: int) -> tuple[str, list[Any]]:
    """Run until ``checkpoints`` checkpoints completed, then cancel; returns the job
    directory and the completed checkpoints' statistics, oldest first."""
    done = run_until_checkpoints(env, checkpoints, "changelog")
    return os.path.dirname(done[-1].external_pointer), done


def _keyed(pointer: str) -> list[Any]:
    metadata, _ = load_pointer(pointer)
    return [
        h
        for op in metadata.operator_states
        for s in op.subtask_states.values()
        for h in s.managed_keyed_state
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoints_reference_the_materialization_and_restore_at_another_parallelism(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    job_dir, done = _run_until(_env(spark, tmp_path, "ckpt-a", backend), 8)
    first, latest = done[0], done[-1]
    handles = _keyed(latest.external_pointer)
    assert len(handles) == 2 and all(isinstance(h, ChangelogStateBackendHandle) for h in handles)
    for h in handles:
        # the first checkpoint materialized; every later one adds its epochs' changes
        assert h.materialization_id == first.checkpoint_id < h.checkpoint_id
        assert h.materialized and len(h.changelog) >= len(done) - 1 >= h.new_entries >= 1
        kind = IncrementalRemoteKeyedStateHandle if backend == "rocksdb" else KeyGroupsStateHandle
        assert all(isinstance(m, kind) for m in h.materialized)
        assert h.backend_identifier == ("rocksdb" if backend == "rocksdb" else "heap")
    # The materialization's checkpoint is subsumed (three are retained), its files are not.
    assert not os.path.exists(first.external_pointer)
    # A changelog checkpoint writes the epochs' changes, not the state.
    for stats in done[1:]:
        assert 0 < stats.checkpointed_size < first.checkpointed_size
    assert audit_checkpoint_directory(job_dir).exact
    committed = collections.Counter(o[1] for o in read_sink(str(tmp_path / "out")) if o[0] == "rec")
    assert sum(committed.values()) > 0

    # The state processor reads the counts the committed output implies.
    from sparkpoint.state_processor import SavepointReader

    frame = SavepointReader.read(spark, latest.external_pointer).read_keyed_state(
        "count", states=["count"]
    )
    counts = {pickle.loads(row[0]): row[1] for row in frame.collect()}  # untyped keys
    assert counts == dict(committed)

    # Restored at parallelism 3: every subtask rebuilds the two writers' state.
    env = _env(
        spark,
        tmp_path,
        "ckpt-b",
        backend,
        parallelism=3,
        restore=latest.external_pointer,
        split=RESUMED_SPLIT,
    )
    env.execute("changelog-rescaled")
    check_keyed_count_output(str(tmp_path / "out"), N_EVENTS, N_KEYS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_failover_restores_a_changelog_checkpoint_and_materializes_again(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    """Four failures at one record outlast Spark's task retries: the job fails over to its
    latest checkpoint, made of a materialization and changes; the output is exact."""
    inj = FailureInjector(str(tmp_path / "inj"), SHORT_RUN * 3 // 4, times=4)
    env = _env(spark, tmp_path, "ckpt", backend, injector=inj, n_events=SHORT_RUN)
    result = env.execute("changelog-failover")
    assert inj.fired() == 4 and result.restarts == 1
    completed = [s for s in result.checkpoints if s.status == "COMPLETED"]
    restored_from = result.failovers[0].checkpoint_id
    before = [s for s in completed if s.checkpoint_id <= restored_from]
    after = [s for s in completed if s.checkpoint_id > restored_from]
    assert len(before) >= 2 and after
    # The restored one only wrote changes; the first after the failover materialized.
    assert before[-1].checkpointed_size < before[0].checkpointed_size
    assert after[0].checkpointed_size > max(s.checkpointed_size for s in after[1:] or [before[-1]])
    check_keyed_count_output(str(tmp_path / "out"), SHORT_RUN, N_KEYS)


def test_an_epoch_whose_changes_were_not_stored_makes_the_next_checkpoint_materialize(
    spark: Any, tmp_path: Path
) -> None:
    """For one epoch the task-owned directory is a file, so no entry can be stored: that
    epoch's checkpoint is declined (its changes would be missing), the next one
    materializes, and the output stays exact."""
    broken: list[int] = []

    def break_one_epoch(event: Any) -> None:
        owned = tmp_path / "ckpt" / event.job_id / "taskowned"
        if event.epoch == 12 and not broken:
            owned.rename(owned.with_name("taskowned.away"))
            owned.write_bytes(b"")
            broken.append(event.epoch)
        elif broken and event.epoch == broken[0] + 1 and owned.is_file():
            owned.unlink()
            owned.with_name("taskowned.away").rename(owned)

    env = _env(spark, tmp_path, "ckpt", "hashmap", n_events=SHORT_RUN)
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(5)
    env.set_fault_injection(Faults().on_epoch_start(break_one_epoch))
    result = env.execute("changelog-missing-entry")
    assert broken == [12] and result.restarts == 0
    stats = sorted(result.checkpoints, key=lambda s: s.checkpoint_id)
    failed = [s for s in stats if s.status == "FAILED"]
    assert len(failed) == 1 and failed[0].epoch == 12
    assert "no complete changelog" in failed[0].failure
    after = [s for s in stats if s.status == "COMPLETED" and s.epoch > 12]
    before = [s for s in stats if s.status == "COMPLETED" and 2 < s.epoch < 12]
    # the first checkpoint after it wrote a materialization, larger than any changes
    assert after and before
    assert after[0].checkpointed_size > max(s.checkpointed_size for s in before)
    check_keyed_count_output(str(tmp_path / "out"), SHORT_RUN, N_KEYS)


def test_retained_checkpoints_keep_exactly_their_files_across_materializations(
    spark: Any, tmp_path: Path
) -> None:
    """Materializing every 150 ms: old materializations and the changes they cover leave
    the directory once no retained checkpoint references them."""
    job_dir, done = _run_until(
        _env(spark, tmp_path, "ckpt", "rocksdb", materialize="150 ms", n_events=100_000), 30
    )
    audit = audit_checkpoint_directory(job_dir)
    assert audit.unreferenced == frozenset() and audit.missing == frozenset()
    retained = [h for s in done[-3:] for h in _keyed(s.external_pointer)]
    assert all(isinstance(h, ChangelogStateBackendHandle) for h in retained)
    # it materialized again since the start, and the retained ones carry changes
    assert min(h.materialization_id for h in retained) > done[0].checkpoint_id
    assert any(h.changelog for h in retained)
    assert sum("/taskowned/" in f for f in audit.files) >= 2  # entries are files here


def _materializations(done: list[Any]) -> list[tuple[int, int]]:
    """(checkpoint id, the materialization it references) of retained checkpoints."""
    out = []
    for stats in done:
        ids = {h.materialization_id for h in _keyed(stats.external_pointer)}
        assert len(ids) == 1, ids  # every subtask references the same one
        out.append((stats.checkpoint_id, ids.pop()))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_periodic_materializations_upload_in_the_background(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    """Materializing every 300 ms at most 4 KiB per second and subtask: only the first
    checkpoint snapshots; later materializations are started by a checkpoint's epoch,
    uploaded while checkpoints go on referencing the previous one, then adopted. The
    directory holds exactly what the retained checkpoints reference, and the latest
    restores exactly at parallelism 3."""
    env = _env(
        spark,
        tmp_path,
        "ckpt-a",
        backend,
        materialize="300 ms",
        n_events=100_000,
        retained=100,
        upload_rate="4 kb",
        spark_job_epochs=True,
    )
    job_dir, done = _run_until(env, 24)
    refs = _materializations(done)
    first = done[0].checkpoint_id
    assert refs[0] == (first, first)
    # no checkpoint but the first wrote a materialization: each wrote its changes only
    for stats in done[1:]:
        assert all(not h.materialized_here for h in _keyed(stats.external_pointer))
        assert 0 < stats.checkpointed_size < done[0].checkpointed_size
    adopted = sorted({m for _c, m in refs} - {first})
    assert adopted, refs  # some background materialization was adopted
    by_id = dict(refs)
    for m in adopted:
        # its own checkpoint went on with the previous materialization
        assert m in by_id and by_id[m] < m, (m, refs)
        if backend == "rocksdb":
            # its files (OPTIONS alone is ~7 KiB) took more than an epoch at 4 KiB/s
            users = [c for c, ref in refs if ref == m]
            assert min(users) > m + 1, (m, refs)
    assert [m for _c, m in refs] == sorted(m for _c, m in refs)  # never an older one
    assert audit_checkpoint_directory(job_dir).exact

    env = _env(
        spark,
        tmp_path,
        "ckpt-b",
        backend,
        parallelism=3,
        restore=done[-1].external_pointer,
        n_events=100_000,
        split=RESUMED_SPLIT,
    )
    env.execute("background-materialization-rescaled")
    check_keyed_count_output(str(tmp_path / "out"), 100_000, N_KEYS)


def test_a_failed_background_materialization_is_abandoned_and_deleted(
    spark: Any, tmp_path: Path
) -> None:
    """The first background materialization's upload fails in one subtask: the driver
    abandons it (the other subtask's files go too), checkpoints go on referencing the
    first materialization, and a later attempt is adopted; the directory stays exact and
    the latest checkpoint restores exactly."""
    failed = tmp_path / "failed-upload"

    def fail_once(operator_id: str, subtask: int, checkpoint_id: int) -> None:
        if checkpoint_id > 2 and subtask == 0 and not failed.exists():
            failed.write_text(str(checkpoint_id))
            raise RuntimeError("injected materialization upload failure")

    env = _env(
        spark,
        tmp_path,
        "ckpt-a",
        "rocksdb",
        materialize="300 ms",
        n_events=100_000,
        retained=100,
        spark_job_epochs=True,
    )
    env.set_fault_injection(Faults().on_upload(fail_once))
    job_dir, done = _run_until(env, 24)
    assert failed.exists()
    failed_id = int(failed.read_text())
    refs = _materializations(done)
    assert all(m != failed_id for _c, m in refs)
    assert any(m > failed_id for _c, m in refs), (failed_id, refs)
    audit = audit_checkpoint_directory(job_dir)
    assert audit.unreferenced == frozenset() and audit.missing == frozenset()

    env = _env(
        spark,
        tmp_path,
        "ckpt-b",
        "rocksdb",
        restore=done[-1].external_pointer,
        n_events=100_000,
        split=RESUMED_SPLIT,
    )
    env.execute("background-materialization-failed-restored")
    check_keyed_count_output(str(tmp_path / "out"), 100_000, N_KEYS)


def test_materialization_failures_beyond_the_allowed_fail_the_job_over(
    spark: Any, tmp_path: Path
) -> None:
    """With state.backend.changelog.max-failures-allowed = 1, the first failed background
    materialization fails the job over (the restart strategy applies); the output stays
    exact."""
    failed = tmp_path / "failed-upload"

    def fail_once(operator_id: str, subtask: int, checkpoint_id: int) -> None:
        if checkpoint_id > 2 and subtask == 1 and not failed.exists():
            failed.write_text(str(checkpoint_id))
            raise RuntimeError("injected materialization upload failure")

    # 30 epochs: the failure (a materialization after checkpoint 2) falls in the first few,
    # the materializations of the restarted job in the rest.
    env = _env(spark, tmp_path, "ckpt", "hashmap", materialize="300 ms", spark_job_epochs=True)
    env.configure({"state.backend.changelog.max-failures-allowed": "1"})
    env.set_fault_injection(Faults().on_upload(fail_once))
    result = env.execute("materialization-failures")
    assert failed.exists() and result.restarts == 1
    [failover] = result.failovers
    assert "periodic materializations failed in a row: 1 " in failover.cause
    assert "state.backend.changelog.max-failures-allowed = 1" in failover.cause
    assert result.materializations  # later ones were adopted
    check_keyed_count_output(str(tmp_path / "out"), N_EVENTS, N_KEYS)


def test_changelog_checkpoints_need_the_changelog(spark: Any, tmp_path: Path) -> None:
    env = _env(spark, tmp_path, "ckpt", "hashmap")
    env.configure({"sparkpoint.state.changelog.enabled": "false"})
    with pytest.raises(ConfigurationError) as info:
        env.execute("refused")
    message = str(info.value)
    assert "state.backend.changelog.enabled" in message
    assert "sparkpoint.state.changelog.enabled" in message
    assert env.is_changelog_state_backend_enabled()
