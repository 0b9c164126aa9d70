"""Snapshots as a trust boundary, end to end on Spark: by default the job's own savepoint
unpickles its objects and a downloaded one is refused naming the opt-in; a job with a
signing key signs its savepoints and restores them exactly; a changed byte of
``_metadata`` or of a state file, and an unsigned snapshot, are refused; a flipped bit in
an unsigned snapshot's state file fails the job naming the file; with allow-pickle false a
job restores its typed state exactly and refuses a crafted pickle; a savepoint header
cannot switch blocks to pickle.

Every crafted pickle would create a marker file when unpickled; it never appears.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import FileStateHandle, KeyGroupsStateHandle
from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import (
    SIGNATURE_SIZE,
    is_signed,
    load_checkpoint_metadata,
    store_checkpoint_metadata,
)
from sparkpoint.checkpoint.origin import ORIGIN_KEY_FILE
from sparkpoint.common import Configuration, RestartStrategies
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import (
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
)
from sparkpoint.errors import JobExecutionError, SnapshotSignatureError
from sparkpoint.fs import get_filesystem
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.snapshot_format import open_key_groups, write_key_groups_snapshot
from tests.fixtures.crafted_pickle import Plant
from tests.runtime.jobs.reference import check_keyed_count_output, keyed_count_job

N_EVENTS = 60_000  # enough that the job is still running when it is cancelled
N_KEYS = 11


def _env(spark: Any, tmp_path: Path, restore: Path | None = None, **keys: str) -> Any:
    """Small epochs for the run that takes the savepoint, large ones for the restores (which
    run to the end)."""
    conf = Configuration()
    per_split = "500" if restore is None else "20000"
    conf.set_string("sparkpoint.epoch.max-records-per-split", per_split)
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local"))
    for key, value in keys.items():
        conf.set_string(f"sparkpoint.snapshot.{key.replace('_', '-')}", value)
    if restore is not None:
        conf.set_string("execution.savepoint.path", str(restore))
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(10)
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.get_checkpoint_config().set_checkpoint_storage(
        # Threshold 0: every keyed stream is a file, so there are files to tamper with.
        FileSystemCheckpointStorage(
            str(tmp_path / "ckpt"), file_state_size_threshold=0, savepoint_path=str(tmp_path / "sp")
        )
    )
    return env


def _savepoint(env: Any, out: Path) -> Path:
    """Run the keyed count for 3 epochs, then stop it with a savepoint: restoring the
    savepoint gives the exact output (a savepoint triggered while the job goes on would not:
    checkpoints completed after it would have committed output it replays)."""
    keyed_count_job(env, str(out), N_EVENTS, N_KEYS)
    client = env.execute_async("trust")
    _wait_for_epochs(client, 3)
    path = Path(client.stop_with_savepoint(False).result(timeout=120))
    client.wait(timeout=120)
    return path


def _retained_checkpoints(env: Any, out: Path) -> str:
    """Run the keyed count for 3 epochs and cancel it, its checkpoints retained; its job
    id."""
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    keyed_count_job(env, str(out), N_EVENTS, N_KEYS)
    client = env.execute_async("trust-retained")
    _wait_for_epochs(client, 3)
    client.cancel().result(timeout=120)
    client.wait(timeout=120)
    return str(client.get_job_id())


def _wait_for_epochs(client: Any, epochs: int) -> None:
    while client.job_master.progress.epochs_run < epochs:
        assert not client.get_job_execution_result().done(), "job ended before the savepoint"
        time.sleep(0.05)


def _state_files(snapshot: Path) -> list[Path]:
    return sorted(p for p in snapshot.iterdir() if p.name != "_metadata")


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position % len(data)] ^= 0x10
    path.write_bytes(bytes(data))


def _copy(snapshot: Path, target: Path) -> Path:
    shutil.copytree(snapshot, target)
    return target


def _restore_fails(spark: Any, tmp_path: Path, pointer: Path, out: Path, **keys: str) -> str:
    """Restore ``pointer`` into the job that wrote it (its file sink at ``out``: a sink
    with another base path is refused first, for its pending commits); the error."""
    env = _env(spark, tmp_path, restore=pointer, **keys)
    keyed_count_job(env, str(out), N_EVENTS, N_KEYS)
    with pytest.raises((JobExecutionError, SnapshotSignatureError)) as info:
        env.execute("trust")
    return str(info.value)


def test_signed_savepoints_restore_exactly_and_refuse_any_change(
    spark: Any, tmp_path: Path
) -> None:
    key_file = tmp_path / "snapshot.key"
    key_file.write_text("a secret shared by the jobs of one team\n")
    key_file.chmod(0o600)
    key = {"signing_key_file": str(key_file)}
    out = tmp_path / "out"
    signed = _savepoint(_env(spark, tmp_path, **key), out)
    metadata = signed / "_metadata"
    assert is_signed(metadata.read_bytes())
    files = _state_files(signed)
    assert len(files) >= 2  # the keyed subtasks' streams (threshold 0)

    # The signed one, untouched: restores exactly (first: the refused restores below
    # redo its pending sink commits into the same directory before they fail).
    env = _env(spark, tmp_path, restore=signed, **key)
    keyed_count_job(env, str(out), N_EVENTS, N_KEYS)
    env.execute("trust")  # the name the savepoint is signed for
    check_keyed_count_output(str(out), N_EVENTS, N_KEYS)

    # One changed byte of _metadata: refused before the job runs anything.
    tampered = _copy(signed, tmp_path / "tampered-metadata")
    _flip(tampered / "_metadata", len(metadata.read_bytes()) // 2)
    message = _restore_fails(spark, tmp_path, tampered, out, **key)
    assert f"Refusing checkpoint metadata file {tampered / '_metadata'}" in message
    assert "signature does not match" in message

    # One changed byte of a state file: the signed digest refuses it, naming the file.
    tampered = _copy(signed, tmp_path / "tampered-state")
    victim = tampered / files[0].name
    _flip(victim, 100)
    message = _restore_fails(spark, tmp_path, tampered, out, **key)
    assert f"State file {victim} is corrupt" in message

    # A savepoint of the job without the key (signed with its checkpoint directory's origin
    # key), read with the key: refused; the same without any signature: refused.
    other = _savepoint(_env(spark, tmp_path), tmp_path / "out-unsigned")
    other_md = other / "_metadata"
    assert is_signed(other_md.read_bytes())
    message = _restore_fails(spark, tmp_path, other, tmp_path / "out-unsigned", **key)
    assert f"Refusing checkpoint metadata file {other_md}: its signature does not match" in message
    unsigned = _copy(other, tmp_path / "unsigned")
    # The signature is a trailer after the frame: without it, the same file unsigned.
    (unsigned / "_metadata").write_bytes(other_md.read_bytes()[:-SIGNATURE_SIZE])
    assert not is_signed((unsigned / "_metadata").read_bytes())
    message = _restore_fails(spark, tmp_path, unsigned, tmp_path / "out-unsigned", **key)
    assert f"Refusing unsigned checkpoint metadata file {unsigned / '_metadata'}" in message


def _rewrite_first_stream(
    snapshot: Path, encoding: str, block: Callable[[int], bytes | None], signing_key: bytes
) -> None:
    """Replace the first keyed stream of ``snapshot`` by one with the same header but
    ``encoding`` and the blocks ``block(key_group)``; rewrite ``_metadata`` with the new
    file's handle (its digest right), signed with ``signing_key``: the checkpoint
    directory's origin key, as whoever can write that directory could (the job's own
    snapshot, so only the pickle checks stand between it and the job)."""
    md_path = snapshot / "_metadata"
    md = load_checkpoint_metadata(md_path.read_bytes(), str(snapshot), str(md_path))
    fs = get_filesystem(str(snapshot))
    factory = FsCheckpointStreamFactory(fs, str(snapshot), str(snapshot), 0, 4096)
    operators = []
    done = False
    for op in md.operator_states:
        subtasks = dict(op.subtask_states)
        for index, sub in op.subtask_states.items():
            if done or not sub.managed_keyed_state:
                continue
            (handle,) = sub.managed_keyed_state
            assert isinstance(handle, KeyGroupsStateHandle)
            assert isinstance(handle.delegate, FileStateHandle)
            with open_key_groups(handle) as (header, blocks):
                non_empty = [kg for kg, _ in blocks]
            first = non_empty[0]
            new = write_key_groups_snapshot(
                factory.create_checkpoint_state_output_stream(),
                dataclasses.replace(header, block_encoding=encoding),
                lambda kg, first=first: block(kg) if kg == first else None,
            )
            assert new is not None
            replaced = dataclasses.replace(
                handle, group_range_offsets=new.group_range_offsets, delegate=new.delegate
            )
            subtasks[index] = dataclasses.replace(sub, managed_keyed_state=(replaced,))
            done = True
        operators.append(dataclasses.replace(op, subtask_states=subtasks))
    assert done
    md_path.write_bytes(
        store_checkpoint_metadata(
            CheckpointMetadata(md.checkpoint_id, tuple(operators), md.master_states, md.properties),
            signing_key=signing_key,
        )
    )


def test_pickle_is_a_boundary_on_restore(spark: Any, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    out = tmp_path / "out"
    out_retained = tmp_path / "out-retained"
    job_id = _retained_checkpoints(_env(spark, tmp_path), out_retained)
    savepoint = _savepoint(_env(spark, tmp_path), out)
    crafted = pickle.dumps([(0, {3: Plant(marker)})], protocol=5)
    origin = (tmp_path / "ckpt" / ORIGIN_KEY_FILE).read_bytes().strip()

    # A savepoint whose header says 'pickle': refused always (the job's own, so pickle is
    # allowed here).
    switched = _copy(savepoint, tmp_path / "switched")
    _rewrite_first_stream(switched, "pickle", lambda kg: crafted, origin)
    message = _restore_fails(spark, tmp_path, switched, out)
    assert "declares 'pickle' blocks in a savepoint" in message

    # A retained heap checkpoint (pickle blocks are its format) with a crafted block:
    # refused with allow-pickle false.
    retained = [c for c in (tmp_path / "ckpt" / job_id).glob("chk-*") if (c / "_metadata").exists()]
    checkpoint = max(retained, key=lambda p: int(p.name[4:]))
    _rewrite_first_stream(checkpoint, "pickle", lambda kg: crafted, origin)
    message = _restore_fails(spark, tmp_path, checkpoint, out_retained, allow_pickle="false")
    assert "it names io.open" in message and "allow-pickle is false" in message
    assert not marker.exists()

    # The job's own savepoint, typed state and plain keys: exact with allow-pickle false.
    env = _env(spark, tmp_path, restore=savepoint, allow_pickle="false")
    keyed_count_job(env, str(out), N_EVENTS, N_KEYS)
    env.execute("no-pickle-restore")
    check_keyed_count_output(str(out), N_EVENTS, N_KEYS)
    assert not marker.exists()


def test_a_flipped_bit_in_an_unsigned_state_file_fails_the_restore_naming_the_file(
    spark: Any, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    savepoint = _savepoint(_env(spark, tmp_path), out)
    victim = _state_files(savepoint)[-1]
    _flip(victim, 7)
    message = _restore_fails(spark, tmp_path, savepoint, out)
    assert f"State file {victim} is corrupt" in message
    assert os.path.exists(victim)  # read, never deleted


class _KeepsFractions(KeyedProcessFunction):
    """Keeps the last record of each key as a ``Fraction`` in untyped (pickled) state: a
    pickle that names a class, as a job's own objects in its state are."""

    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        previous = self.last.value()
        assert previous is None or isinstance(previous, Fraction)
        self.last.update(Fraction(value, 7))
        yield value


def _fractions_job(env: Any) -> None:
    (
        env.from_source(NumberSequenceSource(0, N_EVENTS - 1), None, "numbers")
        .uid("numbers")
        .key_by(lambda x: x % 5)
        .process(_KeepsFractions())
        .uid("keeps")
        .filter(lambda x: False)
        .print()
    )


def test_by_origin_the_jobs_own_savepoint_restores_and_a_download_does_not(
    spark: Any, tmp_path: Path
) -> None:
    """No setting: the job's own savepoint unpickles its objects; the same savepoint
    restored by a job of another checkpoint directory is refused, naming the opt-in, which
    then restores it."""
    env = _env(spark, tmp_path)
    _fractions_job(env)
    client = env.execute_async("fractions")
    _wait_for_epochs(client, 3)
    savepoint = Path(client.stop_with_savepoint(False).result(timeout=120))
    client.wait(timeout=120)

    env = _env(spark, tmp_path, restore=savepoint)
    _fractions_job(env)
    env.execute("fractions")  # the job's own: exact, no setting

    downloaded = _copy(savepoint, tmp_path / "downloads" / savepoint.name)
    elsewhere = tmp_path / "elsewhere"
    env = _env(spark, elsewhere, restore=downloaded)
    _fractions_job(env)
    with pytest.raises(JobExecutionError) as info:
        env.execute("fractions")
    message = str(info.value)
    assert "Refusing to unpickle" in message and "it names fractions.Fraction" in message
    assert "set sparkpoint.snapshot.allow-pickle=true (CLI: --allow-pickle)" in message

    env = _env(spark, elsewhere, restore=downloaded, allow_pickle="true")
    _fractions_job(env)
    env.execute("fractions")  # opted in: the user trusts who wrote it
