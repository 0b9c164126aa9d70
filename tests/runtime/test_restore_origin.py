"""Restores at a job's start (``JobRestore``), without Spark. Trust by origin: the job's own
checkpoint (signed with its checkpoint directory's origin key) and a snapshot signed with the
configured key are unpickled; an unsigned snapshot from elsewhere is read as plain data only,
and its crafted pickle is refused naming the opt-in, before it runs (its marker never
appears). A signing key's signature binds the job name and the checkpoint id.

Real heap checkpoints on real file-system storage; the restore decision is then applied as
the job's tasks apply it (``set_allow_pickle(JobSpec.allow_pickle)``) to a real restore.
And a Python worker that dies before any epoch succeeded since a restore counts against
``sparkpoint.restart.restore-attempts``, as a failed restore does.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.handles import KeyedStateHandle
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import (
    is_signed,
    load_checkpoint_metadata,
    write_metadata,
)
from sparkpoint.checkpoint.origin import ORIGIN_KEY_FILE
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common import Encoder
from sparkpoint.common.typeinfo import Types
from sparkpoint.datastream import (
    FileSystemCheckpointStorage,
    HashMapStateBackend,
    JobManagerCheckpointStorage,
)
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.errors import (
    MetadataFormatError,
    SnapshotSignatureError,
    UnsafeStatePathError,
    UntrustedSnapshotError,
)
from sparkpoint.runtime.driver.changelog_checkpoints import ChangelogCheckpoints
from sparkpoint.runtime.driver.epoch_checkpoints import EpochCheckpoints
from sparkpoint.runtime.driver.failover import JobRestore
from sparkpoint.runtime.driver.keyed_placement import KeyedPlacement
from sparkpoint.runtime.driver.master_state import JobMasterState
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.settings import JobRequest, JobSettings, build_job_settings
from sparkpoint.runtime.driver.sink_commits import SinkCommits
from sparkpoint.runtime.driver.source_coordinator import SourceCoordinator
from sparkpoint.runtime.driver.subtask_recovery import SubtaskRecovery
from sparkpoint.runtime.graph import Plan
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.pickling import set_allow_pickle
from tests.fixtures.crafted_pickle import Plant

MAX_P = 8
UNTYPED = ValueStateDescriptor("v", Types.PICKLED_BYTE_ARRAY())
OPT_IN = "set sparkpoint.snapshot.allow-pickle=true (CLI: --allow-pickle)"


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    clear_heap_cache()
    yield
    set_allow_pickle(True)
    clear_heap_cache()


def _backend(tmp_path: Path, sub: str) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(
        KeyedStateBackendParameters(
            "job",
            "op",
            0,
            1,
            MAX_P,
            KeyGroupRange(0, MAX_P - 1),
            str(tmp_path / sub),
            SYSTEM_CLOCK,
            None,
        )
    )


def _checkpoint(
    base: Path,
    n: int,
    values: dict[Any, Any],
    signing_key: bytes | None,
    job_name: str = "job",
    threshold: int = 0,
    master: JobMasterState | None = None,
    snapshot_type: str = SnapshotType.CHECKPOINT,
) -> Path:
    """chk-N of a job ``job_name`` under ``base``: one heap subtask holding ``values`` in an
    untyped ValueState (a file, or inline in ``_metadata`` above ``threshold``), signed with
    ``signing_key`` when given."""
    storage = FileSystemCheckpointStorage(str(base), file_state_size_threshold=threshold)
    access = storage.create_checkpoint_storage("0123456789abcdef0123456789abcdef")
    assert isinstance(access, FsCheckpointStorageAccess)
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(n)
    backend = _backend(base, f"local-{n}")
    state = backend.get_partitioned_state(UNTYPED)
    for key, value in values.items():
        backend.set_current_key(key)
        state.update(value)
    handle = backend.snapshot(n, location, snapshot_type)()
    backend.dispose()
    metadata = CheckpointMetadata(
        n,
        (OperatorState("op", 1, MAX_P, {0: OperatorSubtaskState((handle,))}),),
        ((master or JobMasterState("0123", job_name, n)).to_master_state(),),
        CheckpointProperties.for_checkpoint("RETAIN_ON_CANCELLATION"),
    )
    return Path(write_metadata(location, metadata, signing_key=signing_key).external_pointer)


def _settings(tmp_path: Path, restore: Path | None, job_name: str = "job", **keys: str) -> Any:
    """Settings of a job checkpointing to ``tmp_path/ckpt``; ``keys``: ``sparkpoint.snapshot.*``
    (``restore_attempts``: ``sparkpoint.restart.restore-attempts``)."""
    attempts = keys.pop("restore_attempts", None)
    config = {
        "parallelism.default": "1",
        "execution.checkpointing.interval": "1 s",
        "execution.savepoint.ignore-unclaimed-state": "true",  # the plan has no operator
        **{f"sparkpoint.snapshot.{k.replace('_', '-')}": v for k, v in keys.items()},
    }
    if restore is not None:
        config["execution.savepoint.path"] = str(restore)
    if attempts is not None:
        config["sparkpoint.restart.restore-attempts"] = attempts
    storage = FileSystemCheckpointStorage(str(tmp_path / "ckpt"), file_state_size_threshold=0)
    return build_job_settings(job_name, JobRequest(config, HashMapStateBackend(), storage))


def _job(
    settings: JobSettings, sinks_by_id: dict[str, Any] | None = None
) -> tuple[JobRestore, EpochCheckpoints]:
    """The parts ``JobMaster`` restores with, for ``settings`` and the sinks ``sinks_by_id``,
    started as ``JobMaster.run`` starts them (storage, then the initial restore)."""
    plan = Plan(stages=[], sources=[], sinks=[], nodes=[])
    changelog = ChangelogCheckpoints(plan, False, None, "heap")
    recovery = SubtaskRecovery(plan, False, enabled=False)
    sources = SourceCoordinator(plan, 1, SYSTEM_CLOCK)
    sinks = SinkCommits(sinks_by_id or {})
    checkpoints = EpochCheckpoints(
        settings.job_id, plan, settings, changelog, recovery, sinks, SYSTEM_CLOCK
    )
    progress = JobProgress(settings, checkpoints, changelog, KeyedPlacement(settings.job_id, plan))
    restore = JobRestore(
        plan, settings, SYSTEM_CLOCK, checkpoints, sources, sinks, recovery, changelog, progress
    )
    checkpoints.initialize_storage()
    restore.initial()
    return restore, checkpoints


def _start(settings: JobSettings, sinks_by_id: dict[str, Any] | None = None) -> EpochCheckpoints:
    """The job's start; its checkpoints (whose coordinator signs what it writes next)."""
    return _job(settings, sinks_by_id)[1]


def _handle(snapshot: Path) -> KeyedStateHandle:
    md = load_checkpoint_metadata((snapshot / "_metadata").read_bytes(), str(snapshot))
    return md.operator_states[0].subtask_states[0].managed_keyed_state[0]


def _restored_values(
    settings: JobSettings, snapshot: Path, tmp_path: Path, keys: list[Any]
) -> dict[Any, Any]:
    """Restore ``snapshot``'s heap state as the job's tasks do (``allow_pickle`` from the
    job's spec) and read ``keys``."""
    set_allow_pickle(settings.pickle_allowed)
    clear_heap_cache()
    backend = _backend(tmp_path, f"restore-{len(list(tmp_path.iterdir()))}")
    try:
        backend.restore([_handle(snapshot)])
        state = backend.get_partitioned_state(UNTYPED)
        out = {}
        for key in keys:
            backend.set_current_key(key)
            out[key] = state.value()
        return out
    finally:
        backend.dispose()


def test_an_unsigned_snapshot_from_elsewhere_is_plain_data_only_naming_the_opt_in(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    downloaded = _checkpoint(tmp_path / "downloads", 1, {1: 1, 2: Plant(marker)}, None)

    settings = _settings(tmp_path, downloaded)
    checkpoints = _start(settings)
    assert settings.pickle_allowed is False
    with pytest.raises(UntrustedSnapshotError) as info:
        _restored_values(settings, downloaded, tmp_path, [1, 2])
    message = str(info.value)
    assert "Refusing to unpickle" in message and "it names io.open" in message
    assert "neither signed with the configured signing key nor one of this job's own" in message
    assert OPT_IN in message
    assert not marker.exists()
    # Its state may live on in this run's checkpoints: they are not signed as the job's own.
    assert checkpoints.coordinator.policy.trust.key_for_writing() is None

    # Copied into the job's own checkpoint directory, it is still not the job's own.
    copied = tmp_path / "ckpt" / "copied" / "chk-1"
    shutil.copytree(downloaded, copied)
    settings = _settings(tmp_path, copied)
    _start(settings)
    assert settings.pickle_allowed is False

    # The opt-in: the user trusts who wrote it.
    settings = _settings(tmp_path, downloaded, allow_pickle="true")
    _start(settings)
    assert settings.pickle_allowed is True


def test_an_arrow_savepoints_pickled_keys_from_elsewhere_are_refused(tmp_path: Path) -> None:
    """A savepoint holds no pickle blocks, but its keys are pickles: from elsewhere, a key
    that names code is refused too; plain keys restore exactly."""
    keys = {Fraction(k, 7): k for k in range(1, 9)}
    downloaded = _checkpoint(
        tmp_path / "downloads", 1, keys, None, snapshot_type=SnapshotType.SAVEPOINT
    )
    settings = _settings(tmp_path, downloaded)
    _start(settings)
    assert settings.pickle_allowed is False
    with pytest.raises(UntrustedSnapshotError, match=r"it names fractions\.Fraction") as info:
        _restored_values(settings, downloaded, tmp_path, list(keys))
    assert OPT_IN in str(info.value)

    plain = {(k, f"k{k}"): [k, None] for k in range(1, 9)}
    downloaded = _checkpoint(
        tmp_path / "downloads", 2, plain, None, snapshot_type=SnapshotType.SAVEPOINT
    )
    settings = _settings(tmp_path, downloaded)
    _start(settings)
    assert _restored_values(settings, downloaded, tmp_path, list(plain)) == plain


def test_the_jobs_own_checkpoint_restores_with_pickle_and_no_setting(tmp_path: Path) -> None:
    values = {k: Fraction(k, 3) for k in range(1, 20)}  # pickles that name a class
    first = _settings(tmp_path, None)
    checkpoints = _start(first)
    assert first.pickle_allowed is True
    # What the job's coordinator signs its checkpoints with: the origin key, made now.
    key = checkpoints.coordinator.policy.trust.key_for_writing()
    key_file = tmp_path / "ckpt" / ORIGIN_KEY_FILE
    assert key is not None and key_file.read_bytes().strip() == key
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    own = _checkpoint(tmp_path / "ckpt", 4, values, key)
    assert is_signed((own / "_metadata").read_bytes())

    settings = _settings(tmp_path, own, job_name="a later run")
    checkpoints = _start(settings)
    assert settings.pickle_allowed is True
    assert _restored_values(settings, own, tmp_path, list(values)) == values
    assert checkpoints.coordinator.policy.trust.key_for_writing() == key  # still its own

    # The same checkpoint restored by a job with another checkpoint directory: not its own.
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    settings = _settings(elsewhere, own)
    _start(settings)
    assert settings.pickle_allowed is False
    with pytest.raises(UntrustedSnapshotError, match=r"it names fractions\.Fraction"):
        _restored_values(settings, own, tmp_path, [1])

    # allow-pickle false: plain data only, the job's own included.
    settings = _settings(tmp_path, own, allow_pickle="false")
    _start(settings)
    assert settings.pickle_allowed is False


def test_a_signed_snapshot_restores_and_its_signature_binds_job_and_checkpoint(
    tmp_path: Path,
) -> None:
    values = {k: Fraction(1, k) for k in range(1, 12)}
    key = "a team's key"
    signed = _checkpoint(tmp_path / "team", 3, values, key.encode(), job_name="counts")

    settings = _settings(tmp_path, signed, job_name="counts", signing_key=key)
    _start(settings)
    assert settings.pickle_allowed is True
    assert _restored_values(settings, signed, tmp_path, list(values)) == values

    # Another job (name) with the same key: refused, naming both.
    with pytest.raises(SnapshotSignatureError) as info:
        _start(_settings(tmp_path, signed, job_name="sums", signing_key=key))
    assert str(info.value) == (
        f"Refusing checkpoint metadata file {signed / '_metadata'}: it is signed for job "
        "'counts', and this job is 'sums' (a signature binds the job name). Run the job as "
        "'counts' to restore it."
    )

    # An older signed checkpoint replayed under a newer one's name: refused (state inline,
    # so that no state file path gives it away first).
    older = _checkpoint(tmp_path / "team", 4, values, key.encode(), "counts", 1 << 20)
    newer = _checkpoint(tmp_path / "team", 5, values, key.encode(), "counts", 1 << 20)
    shutil.copy(older / "_metadata", newer / "_metadata")
    with pytest.raises(MetadataFormatError) as replay:
        _start(_settings(tmp_path, newer, job_name="counts", signing_key=key))
    assert str(replay.value) == (
        f"Refusing checkpoint metadata file {newer / '_metadata'}: it holds checkpoint 4, "
        "not 5 as its directory's name says (a copied or replayed _metadata?)"
    )


def test_file_sink_commits_of_an_untrusted_snapshot_must_be_the_restoring_jobs(
    tmp_path: Path,
) -> None:
    """A crafted snapshot stating another job's id cannot make the sink publish that job's
    staged file; the job's own snapshot continues its run's commits as before."""
    out = tmp_path / "out"
    staged = out / ".inprogress" / "victim-job" / "part-victi-0-1-0.0.5f3a"
    staged.parent.mkdir(parents=True)
    staged.write_text("another job's uncommitted output\n")
    final = out / "part-victi-0-1-0"
    commits = (("files", [[str(staged), str(final)]]),)
    master = JobMasterState("victim-job", "job", 1, pending_sink_commits=commits)
    crafted = _checkpoint(tmp_path / "downloads", 1, {1: 1}, None, master=master)
    sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()

    settings = _settings(tmp_path, crafted)
    with pytest.raises(UnsafeStatePathError) as info:
        _start(settings, {"files": sink})
    assert str(info.value) == (
        f"Refusing the file sink's committable 0 staged path {str(staged)!r} in checkpoint "
        f"metadata file {crafted / '_metadata'}, field pending_sink_commits['files'] (a "
        "snapshot that is neither this job's own nor signed, so its sink commits must be this "
        "job's: set sparkpoint.snapshot.allow-pickle=true if you trust who wrote it): it is "
        f"not a file of {out}/.inprogress/{settings.job_id}/. A restored snapshot's sink "
        "commits must lie in the sink's own directories (a sink whose base path changed "
        "since the snapshot cannot redo them: restore with the base path the snapshot was "
        "taken with)."
    )
    assert not final.exists() and staged.exists()

    # The job's own checkpoint of the run 'victim-job': its record, redone at the restore.
    first = _settings(tmp_path, None)
    key = _start(first).coordinator.policy.trust.key_for_writing()
    own = _checkpoint(tmp_path / "ckpt", 2, {1: 1}, key, master=master)
    _start(_settings(tmp_path, own), {"files": sink})
    assert final.read_text() == "another job's uncommitted output\n" and not staged.exists()


def test_without_a_checkpoint_directory_the_savepoint_directory_holds_the_origin_key(
    tmp_path: Path,
) -> None:
    config = {
        "parallelism.default": "1",
        "execution.checkpointing.savepoint-dir": str(tmp_path / "sp"),
    }
    settings = build_job_settings(
        "job", JobRequest(config, HashMapStateBackend(), JobManagerCheckpointStorage())
    )
    assert settings.policy.trust.origin_dir == str(tmp_path / "sp")
    in_memory = build_job_settings(
        "job", JobRequest({"parallelism.default": "1"}, HashMapStateBackend())
    )
    assert in_memory.policy.trust.origin_dir is None
    assert in_memory.policy.trust.key_for_writing() is None  # nothing to mark its own by


# What the driver receives when a Python worker dies mid-task (PySpark's Py4J error text,
# Spark 4's message; the restore watchdog's exit reads the same).
CRASH = (
    "An error occurred while calling o93.collectAndServe.\n: org.apache.spark.SparkException: "
    "Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent "
    "failure: Lost task 0.0 in stage 3.0 (TID 7) (localhost executor driver): "
    "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"
)


def test_a_worker_crash_after_a_restore_counts_against_restore_attempts(tmp_path: Path) -> None:
    snapshot = _checkpoint(tmp_path / "ckpt", 2, {1: 1}, None)
    settings = _settings(tmp_path, snapshot, **{"restore_attempts": "2"})
    restore, _ = _job(settings)
    crashed = RuntimeError(CRASH)
    assert restore.cannot_restart(crashed, 1) is None  # 1 of 2: the restart strategy decides
    assert restore.cannot_restart(crashed, 1) == (
        f"Job 'job' ({settings.job_id}) failed: restoring {snapshot} failed 2 times "
        "(sparkpoint.restart.restore-attempts = 2); the last error: Python worker exited "
        "unexpectedly (crashed): a Python worker died (a crash, a kill, or "
        "sparkpoint.restart.restore-timeout) while running the first epoch after the restore"
    )

    # Once an epoch succeeded, a crash is the restart strategy's alone (unlimited here).
    restore, _ = _job(_settings(tmp_path, snapshot, **{"restore_attempts": "2"}))
    restore.epoch_accepted()
    assert [restore.cannot_restart(crashed, 5) for _ in range(5)] == [None] * 5
    # A failover restores the snapshot again: crashes count anew.
    restore.roll_back(crashed, 5, 1)
    assert restore.cannot_restart(crashed, 5) is None
    assert "failed 2 times" in str(restore.cannot_restart(crashed, 5))
