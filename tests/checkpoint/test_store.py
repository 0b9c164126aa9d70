"""CompletedCheckpointStore: retention, subsumption, shared state and the shutdown matrix."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsStateHandle,
    PlaceholderStreamStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.id_counter import CheckpointIDCounter
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.properties import CheckpointProperties, CheckpointType, JobStatus
from sparkpoint.checkpoint.storage import CompletedCheckpointStorageLocation
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore

NEVER = CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION
SAVEPOINT = CheckpointProperties.for_savepoint()


def _write(path: Path, data: bytes = b"state") -> FileStateHandle:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return FileStateHandle(str(path), len(data))


def make_checkpoint(
    root: Path,
    checkpoint_id: int,
    props: CheckpointProperties = NEVER,
    shared: tuple[StreamStateHandle, ...] | None = None,
) -> CompletedCheckpoint:
    """A checkpoint with a real directory: an exclusive state file, ``_metadata`` and,
    with ``shared``, an incremental handle whose shared files live in ``root/shared``."""
    name = f"savepoint-{checkpoint_id}" if props.is_savepoint else f"chk-{checkpoint_id}"
    directory = root / name
    exclusive = _write(directory / f"full-{checkpoint_id}")
    keyed: list = [
        KeyGroupsStateHandle(
            KeyGroupRangeOffsets(KeyGroupRange(0, 1), (0, 2)), exclusive, f"h{checkpoint_id}"
        )
    ]
    if shared is not None:
        keyed.append(
            IncrementalRemoteKeyedStateHandle(
                "backend",
                KeyGroupRange(2, 3),
                checkpoint_id,
                tuple(HandleAndLocalPath(h, Path(h.physical_id).name) for h in shared),
                (HandleAndLocalPath(_write(directory / "MANIFEST"), "MANIFEST"),),
                ByteStreamStateHandle(f"meta{checkpoint_id}", b"meta"),
            )
        )
    ops = (OperatorState("op", 1, 8, {0: OperatorSubtaskState(tuple(keyed))}),)
    metadata_handle = _write(directory / "_metadata", b"SPKM")
    location = CompletedCheckpointStorageLocation(str(directory), metadata_handle, str(directory))
    return CompletedCheckpoint(
        "job",
        checkpoint_id,
        1000 + checkpoint_id,
        2000 + checkpoint_id,
        ops,
        props,
        location,
        CheckpointMetadata(checkpoint_id, ops, (), props),
    )


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _ids(store: CompletedCheckpointStore) -> list[int]:
    return [c.checkpoint_id for c in store.get_all_checkpoints()]


def test_max_retained_must_be_positive() -> None:
    with pytest.raises(ValueError, match="Must retain at least one checkpoint"):
        CompletedCheckpointStore(0)


def test_retains_the_last_n_and_deletes_subsumed(tmp_path: Path) -> None:
    store = CompletedCheckpointStore(max_retained=2)
    subsumed_ids = []
    for i in range(1, 6):
        subsumed = store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, i))
        subsumed_ids.append(None if subsumed is None else subsumed.checkpoint_id)
    assert subsumed_ids == [None, None, 1, 2, 3]
    assert _ids(store) == [4, 5]
    assert store.get_latest_checkpoint().checkpoint_id == 5  # type: ignore[union-attr]
    assert store.get_latest_checkpoint_id() == 5
    assert len(store) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chk-4", "chk-5"]


def test_checkpoint_ids_must_increase(tmp_path: Path) -> None:
    store = CompletedCheckpointStore(2)
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 5))
    with pytest.raises(ValueError, match="Checkpoint 5 is not newer than the latest"):
        store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path / "b", 5))


def test_savepoints_count_but_are_never_discarded(tmp_path: Path) -> None:
    store = CompletedCheckpointStore(2)
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 1))
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 2, SAVEPOINT))
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 3))
    assert _ids(store) == [2, 3]
    assert not (tmp_path / "chk-1").exists()
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 4))
    assert _ids(store) == [3, 4]
    assert (tmp_path / "savepoint-2" / "_metadata").exists(), "savepoints are never discarded"


def test_latest_non_savepoint_checkpoint_is_always_kept(tmp_path: Path) -> None:
    store = CompletedCheckpointStore(1)
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 1))
    assert store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 2, SAVEPOINT)) is None
    assert _ids(store) == [1, 2]
    assert (tmp_path / "chk-1").exists()
    subsumed = store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 3))
    assert subsumed is not None and subsumed.checkpoint_id == 2
    assert _ids(store) == [3]
    assert not (tmp_path / "chk-1").exists()
    assert (tmp_path / "savepoint-2").exists()


def test_stop_with_savepoint_subsumes_everything(tmp_path: Path) -> None:
    store = CompletedCheckpointStore(1)
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 1))
    sync = CheckpointProperties.for_sync_savepoint(terminate=True)
    assert sync.is_synchronous and sync.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 2, sync))
    assert _ids(store) == [2]
    assert not (tmp_path / "chk-1").exists()


def test_shared_state_deleted_only_when_no_retained_checkpoint_uses_it(tmp_path: Path) -> None:
    shared_dir = tmp_path / "shared"
    a, b = _write(shared_dir / "a.sst"), _write(shared_dir / "b.sst")
    store = CompletedCheckpointStore(1)
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 1, shared=(a, b)))
    c = _write(shared_dir / "c.sst")
    cp2 = make_checkpoint(tmp_path, 2, shared=(PlaceholderStreamStateHandle(b.path, b.size), c))
    store.add_checkpoint_and_subsume_oldest(cp2)
    assert sorted(p.name for p in shared_dir.iterdir()) == ["b.sst", "c.sst"]
    # the placeholder was swapped for the registered handle
    inc = store.get_latest_checkpoint().operator_states[0].subtask_states[0].managed_keyed_state[1]  # type: ignore[union-attr]
    assert isinstance(inc, IncrementalRemoteKeyedStateHandle)
    assert inc.shared_state[0].handle is b
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 3, shared=(c,)))
    assert sorted(p.name for p in shared_dir.iterdir()) == ["c.sst"]
    registry = store.shared_state_registry
    assert registry.keys() == [c.path]
    entry = registry.get_entry(c.path)
    assert entry is not None
    assert (entry.created_by_checkpoint_id, entry.last_used_checkpoint_id) == (2, 3)


@pytest.mark.parametrize(
    ("props", "status", "kept"),
    [
        (CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION, "FINISHED", False),
        (CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION, "CANCELED", False),
        (CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION, "FAILED", False),
        (CheckpointProperties.RETAIN_ON_FAILURE, "FINISHED", False),
        (CheckpointProperties.RETAIN_ON_FAILURE, "CANCELED", False),
        (CheckpointProperties.RETAIN_ON_FAILURE, "FAILED", True),
        (CheckpointProperties.RETAIN_ON_CANCELLATION, "FINISHED", False),
        (CheckpointProperties.RETAIN_ON_CANCELLATION, "CANCELED", True),
        (CheckpointProperties.RETAIN_ON_CANCELLATION, "FAILED", True),
    ],
)
def test_shutdown_matrix(
    tmp_path: Path, props: CheckpointProperties, status: str, kept: bool
) -> None:
    shared_dir = tmp_path / "shared"
    store = CompletedCheckpointStore(2)
    sp = make_checkpoint(tmp_path, 1, SAVEPOINT)
    store.add_checkpoint_and_subsume_oldest(sp)
    a = _write(shared_dir / "a.sst")
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 2, props, shared=(a,)))
    store.add_checkpoint_and_subsume_oldest(
        make_checkpoint(tmp_path, 3, props, shared=(PlaceholderStreamStateHandle(a.path, 5),))
    )
    before = _tree(tmp_path)
    remaining = store.shutdown(status)
    assert [c.checkpoint_id for c in remaining] == ([2, 3] if kept else [])
    if kept:
        assert _tree(tmp_path) == before
    else:
        # the savepoint was subsumed (it counted toward num-retained) but never deleted
        assert _tree(tmp_path) == {"savepoint-1/_metadata", "savepoint-1/full-1"}
    assert len(store) == 0


def test_suspended_keeps_everything(tmp_path: Path) -> None:
    store = CompletedCheckpointStore(1)
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 1))
    before = _tree(tmp_path)
    assert [c.checkpoint_id for c in store.shutdown(JobStatus.SUSPENDED)] == [1]
    assert _tree(tmp_path) == before
    assert _ids(store) == [1]


def test_shutdown_rejects_unknown_status(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Unknown job status 'EXPLODED'"):
        CompletedCheckpointStore(1).shutdown("EXPLODED")


def test_savepoint_survives_shutdown_that_discards_checkpoints(tmp_path: Path) -> None:
    store = CompletedCheckpointStore(3)
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 1))
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 2, SAVEPOINT))
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(tmp_path, 3))
    kept = store.shutdown("CANCELED")
    assert [c.checkpoint_id for c in kept] == [2]
    assert {p.name for p in tmp_path.iterdir()} == {"savepoint-2"}


def test_subsumption_through_the_cleaner(tmp_path: Path) -> None:
    calls = []
    with CheckpointsCleaner(parallel_mode=True, max_workers=3) as cleaner:
        store = CompletedCheckpointStore(1)
        for i in range(1, 5):
            store.add_checkpoint_and_subsume_oldest(
                make_checkpoint(tmp_path, i), cleaner, post_cleanup=lambda: calls.append(1)
            )
        assert cleaner.wait_until_idle(10)
        assert cleaner.get_number_of_checkpoints_to_clean() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chk-4"]
    assert len(calls) == 4  # once per add: 1 without subsumption + 3 cleanups


def test_cleaner_counts_in_flight_cleanups(tmp_path: Path) -> None:
    gate = threading.Event()
    cleaner = CheckpointsCleaner(parallel_mode=False, max_workers=1)
    cp = make_checkpoint(tmp_path, 1)
    cleaner._pool.submit(gate.wait)  # occupy the only worker
    future = cleaner.clean_checkpoint(cp)
    assert cleaner.get_number_of_checkpoints_to_clean() == 1
    assert not future.done()
    gate.set()
    future.result(timeout=10)
    assert cleaner.get_number_of_checkpoints_to_clean() == 0
    assert cp.is_discarded and not (tmp_path / "chk-1").exists()
    cleaner.close()
    with pytest.raises(RuntimeError, match="closed"):
        cleaner.clean_checkpoint(make_checkpoint(tmp_path, 2))


def test_cleaner_keeps_savepoints_and_in_use(tmp_path: Path) -> None:
    cleaner = CheckpointsCleaner()
    cp1, sp2, cp3 = (
        make_checkpoint(tmp_path, 1),
        make_checkpoint(tmp_path, 2, SAVEPOINT),
        make_checkpoint(tmp_path, 3),
    )
    for c in (cp1, sp2, cp3):
        cleaner.add_subsumed_checkpoint(c)
    assert cleaner.clean_subsumed_checkpoints(up_to=3, still_in_use={1}) == 1
    assert cleaner.wait_until_idle(10)
    assert (tmp_path / "chk-1").exists() and (tmp_path / "savepoint-2").exists()
    assert cleaner.clean_subsumed_checkpoints() == 2
    assert cleaner.wait_until_idle(10)
    assert {p.name for p in tmp_path.iterdir()} == {"savepoint-2"}
    cleaner.close()


def test_completed_checkpoint_properties(tmp_path: Path) -> None:
    cp = make_checkpoint(tmp_path, 4, CheckpointProperties.RETAIN_ON_FAILURE)
    assert cp.external_pointer == str(tmp_path / "chk-4")
    assert cp.state_size == len(b"state")
    assert cp.should_be_discarded_on_subsume()
    assert not cp.should_be_discarded_on_shutdown("FAILED")
    assert cp.discard_on_shutdown("FAILED") is False
    assert (tmp_path / "chk-4").exists()
    assert cp.discard_on_subsume() is True
    assert cp.is_discarded and not (tmp_path / "chk-4").exists()
    assert "Checkpoint 4" in repr(cp)


def test_from_metadata_defaults_to_savepoint_properties(tmp_path: Path) -> None:
    cp = make_checkpoint(tmp_path, 2)
    md = CheckpointMetadata(2, cp.operator_states)
    restored = CompletedCheckpoint.from_metadata("job", md, cp.location)
    assert restored.properties.is_savepoint
    assert restored.operator_states == cp.operator_states


@pytest.mark.parametrize("mode", ["NO_CLAIM", "CLAIM"])
def test_restored_checkpoint_claim_modes(tmp_path: Path, mode: str) -> None:
    old = tmp_path / "old-job"
    a = _write(old / "shared" / "a.sst")
    restored = make_checkpoint(old, 7, CheckpointProperties.RETAIN_ON_CANCELLATION, shared=(a,))
    store = CompletedCheckpointStore(1)
    store.add_restored_checkpoint(restored, mode)
    new = tmp_path / "new-job"
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(new, 8))
    store.add_checkpoint_and_subsume_oldest(make_checkpoint(new, 9))
    claimed = mode == "CLAIM"
    assert (old / "chk-7").exists() is not claimed
    assert Path(a.path).exists() is not claimed
    assert _ids(store) == [9]


def test_id_counter() -> None:
    counter = CheckpointIDCounter()
    assert counter.get() == 1
    assert [counter.get_and_increment() for _ in range(3)] == [1, 2, 3]
    counter.set_count(42)
    assert counter.get_and_increment() == 42 and counter.get() == 43
    with pytest.raises(ValueError, match="must not be negative"):
        counter.set_count(-1)
    with pytest.raises(ValueError):
        CheckpointIDCounter(-5)


def test_properties_matrix_and_retention_mapping() -> None:
    rows = {
        "NEVER": CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION,
        "FAILURE": CheckpointProperties.RETAIN_ON_FAILURE,
        "CANCEL": CheckpointProperties.RETAIN_ON_CANCELLATION,
        "SAVEPOINT": CheckpointProperties.for_savepoint(),
    }
    table = {
        name: (
            *(p.discard_on_job_status(s) for s in ("FINISHED", "CANCELED", "FAILED", "SUSPENDED")),
            p.discard_subsumed,
        )
        for name, p in rows.items()
    }
    assert table == {
        "NEVER": (True, True, True, True, True),
        "FAILURE": (True, True, False, True, True),
        "CANCEL": (True, False, False, False, True),
        "SAVEPOINT": (False, False, False, False, False),
    }
    assert CheckpointProperties.for_checkpoint("DELETE_ON_CANCELLATION") is rows["FAILURE"]
    assert CheckpointProperties.for_checkpoint(0) is rows["FAILURE"]
    assert CheckpointProperties.for_checkpoint("RETAIN_ON_CANCELLATION") is rows["CANCEL"]
    assert CheckpointProperties.for_checkpoint(1) is rows["CANCEL"]
    assert CheckpointProperties.for_checkpoint("NO_EXTERNALIZED_CHECKPOINTS") is rows["NEVER"]
    assert CheckpointProperties.for_checkpoint(2) is rows["NEVER"]
    assert CheckpointProperties.for_checkpoint(None) is rows["NEVER"]
    with pytest.raises(ValueError, match="Unknown externalized checkpoint retention 7"):
        CheckpointProperties.for_checkpoint(7)
    unclaimed = CheckpointProperties.for_unclaimed_snapshot()
    assert unclaimed.unclaimed and unclaimed.is_savepoint and not unclaimed.discard_subsumed
