"""SharedStateRegistry: Flink's last-used-id semantics on real files."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.shared_registry import RecoveryClaimMode, SharedStateRegistry


def _file(tmp_path: Path, name: str, size: int = 10) -> FileStateHandle:
    path = tmp_path / name
    path.write_bytes(b"x" * size)
    return FileStateHandle(str(path), size)


def test_first_registration_returns_handle_and_records_ids(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    h = _file(tmp_path, "a.sst")
    assert reg.register_reference(h, 3) is h
    entry = reg.get_entry(h.path)
    assert entry is not None
    assert (entry.created_by_checkpoint_id, entry.last_used_checkpoint_id) == (3, 3)
    assert reg.check_in_use(h)
    assert len(reg) == 1 and reg.keys() == [h.path]


def test_placeholder_is_swapped_and_advances_last_used(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    h = _file(tmp_path, "a.sst")
    reg.register_reference(h, 1)
    resolved = reg.register_reference(PlaceholderStreamStateHandle(h.path, 10), 4)
    assert resolved is h
    entry = reg.get_entry(h.path)
    assert entry is not None
    assert (entry.created_by_checkpoint_id, entry.last_used_checkpoint_id) == (1, 4)


def test_same_and_equal_objects_are_accepted(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    h = _file(tmp_path, "a.sst")
    reg.register_reference(h, 1)
    assert reg.register_reference(h, 2) is h
    equal = FileStateHandle(h.path, 10)
    assert reg.register_reference(equal, 3) is h
    assert Path(h.path).exists(), "an equal duplicate must not delete the shared file"
    assert reg.get_entry(h.path).last_used_checkpoint_id == 3  # type: ignore[union-attr]


def test_conflicting_registration_is_refused(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    h = _file(tmp_path, "a.sst")
    reg.register_reference(h, 1)
    with pytest.raises(ValueError, match="Unexpected registration under key"):
        reg.register_reference(ByteStreamStateHandle(h.path, b"other"), 2)


def test_placeholder_for_unknown_state_is_refused() -> None:
    reg = SharedStateRegistry()
    with pytest.raises(ValueError, match="Attempt to reference unknown shared state"):
        reg.register_reference(PlaceholderStreamStateHandle("/nowhere.sst", 5), 1)


def test_unregister_discards_only_unused(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    a, b, c = (_file(tmp_path, n) for n in ("a", "b", "c"))
    reg.register_reference(a, 1)
    reg.register_reference(b, 1)
    reg.register_reference(PlaceholderStreamStateHandle(b.path, 10), 2)
    reg.register_reference(c, 2)
    discarded = reg.unregister_unused_state(2)
    assert discarded == [a]
    assert not Path(a.path).exists()
    assert Path(b.path).exists() and Path(c.path).exists()
    assert sorted(reg.keys()) == sorted([b.path, c.path])
    assert reg.unregister_unused_state(2) == []
    assert reg.unregister_unused_state(3) == [b, c]
    assert list(tmp_path.iterdir()) == []


def _incremental(checkpoint_id: int, shared: list[StreamStateHandle]) -> OperatorState:
    handle = IncrementalRemoteKeyedStateHandle(
        "b",
        KeyGroupRange(0, 7),
        checkpoint_id,
        tuple(HandleAndLocalPath(h, Path(h.physical_id).name) for h in shared),
        (),
        ByteStreamStateHandle(f"meta-{checkpoint_id}", b"m"),
    )
    return OperatorState("op", 1, 8, {0: OperatorSubtaskState((handle,))})


def test_register_all_resolves_placeholders_in_operator_states(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    a = _file(tmp_path, "a.sst")
    reg.register_all([_incremental(1, [a])], 1)
    placeholder_state = _incremental(2, [PlaceholderStreamStateHandle(a.path, 10)])
    (resolved,) = reg.register_all([placeholder_state], 2)
    inc = resolved.subtask_states[0].managed_keyed_state[0]
    assert isinstance(inc, IncrementalRemoteKeyedStateHandle)
    assert inc.shared_state[0].handle is a


@pytest.mark.parametrize(
    ("mode", "deleted"),
    [(RecoveryClaimMode.NO_CLAIM, False), ("LEGACY", False), (RecoveryClaimMode.CLAIM, True)],
)
def test_restored_state_is_deleted_only_when_claimed(
    tmp_path: Path, mode: str, deleted: bool
) -> None:
    reg = SharedStateRegistry()
    restored_file = _file(tmp_path, "restored.sst")

    class Restored:
        checkpoint_id = 5
        operator_states = (_incremental(5, [restored_file]),)

    reg.register_all_after_restore(Restored(), mode)
    assert reg.highest_not_claimed_checkpoint_id == (-1 if deleted else 5)
    new_file = _file(tmp_path, "new.sst")
    reg.register_reference(new_file, 6)
    assert reg.unregister_unused_state(7) == ([restored_file, new_file] if deleted else [new_file])
    assert Path(restored_file.path).exists() is not deleted
    assert not Path(new_file.path).exists()


def test_unknown_claim_mode() -> None:
    with pytest.raises(ValueError, match="Unknown claim mode 'SOMETIMES'"):
        RecoveryClaimMode.of("SOMETIMES")


def test_discard_executor_is_used(tmp_path: Path) -> None:
    jobs: list[Callable[[], None]] = []
    reg = SharedStateRegistry(discard_executor=jobs.append)
    a = _file(tmp_path, "a")
    reg.register_reference(a, 1)
    reg.unregister_unused_state(2)
    assert Path(a.path).exists() and len(jobs) == 1
    jobs[0]()
    assert not Path(a.path).exists()


def test_closed_registry_refuses_registration(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    reg.close()
    with pytest.raises(ValueError, match="closed"):
        reg.register_reference(_file(tmp_path, "a"), 1)


def test_concurrent_registration_is_consistent(tmp_path: Path) -> None:
    reg = SharedStateRegistry()
    handles = [_file(tmp_path, f"f{i}") for i in range(50)]

    def worker(cp: int) -> None:
        for h in handles:
            reg.register_reference(h, cp)

    threads = [threading.Thread(target=worker, args=(cp,)) for cp in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reg) == 50
    assert all(reg.get_entry(h.path).last_used_checkpoint_id == 8 for h in handles)  # type: ignore[union-attr]
