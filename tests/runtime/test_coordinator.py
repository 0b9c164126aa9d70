"""CheckpointCoordinator against real file-system storage and a real store, with a fake clock.

Pure Python: no Spark. Each test drives the coordinator the way the job master does
(``is_due`` → ``trigger`` → tasks write state through the location → ``complete``/``abort``)
and checks the policy decisions, the files on disk and the statistics.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.fs_location import FsCheckpointStorageLocation
from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    PlaceholderStreamStateHandle,
    StateObject,
    StreamStateHandle,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import MasterState, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint
from sparkpoint.checkpoint.properties import CheckpointType
from sparkpoint.checkpoint.storage import CheckpointStorageLocation
from sparkpoint.checkpoint.store import CompletedCheckpointStore
from sparkpoint.checkpoint.streams import CheckpointedStateScope
from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage
from sparkpoint.errors import CheckpointException, CheckpointFailureReason
from sparkpoint.runtime.driver.coordinator import (
    CheckpointCoordinator,
    CheckpointPolicy,
    PendingCheckpoint,
)
from sparkpoint.testing import ManualClock
from tests.fixtures.checkpoints import keyed_handle

JOB = "0123456789abcdef0123456789abcdef"
SMALL = b"s" * 100  # inline (below the 20 KiB threshold)
LARGE = b"L" * 30_000  # a file (above the threshold)
EXCEEDED = "Exceeded checkpoint tolerable failure threshold."


class Harness:
    """A coordinator for job ``JOB`` with storage under ``tmp_path`` and a fake clock."""

    def __init__(
        self,
        tmp_path: Path,
        num_retained: int = 1,
        cleaner: CheckpointsCleaner | None = None,
        savepoint_dir: str | None = None,
        **policy: object,
    ) -> None:
        self.root = tmp_path / "checkpoints"
        self.clock = ManualClock()
        storage = FileSystemCheckpointStorage(self.root.as_uri(), savepoint_path=savepoint_dir)
        access = storage.create_checkpoint_storage(JOB)
        assert isinstance(access, FsCheckpointStorageAccess)
        access.initialize_base_locations_for_checkpoint()
        self.access = access
        self.store = CompletedCheckpointStore(num_retained)
        self.cleaner = cleaner
        params: dict[str, object] = {"interval_ms": 1000, "tolerable_failures": 100}
        params.update(policy)
        self.coordinator = CheckpointCoordinator(
            JOB,
            CheckpointPolicy(**params),  # type: ignore[arg-type]
            access,
            self.store,
            cleaner,
            clock=self.clock,
        )

    @property
    def job_dir(self) -> Path:
        return self.root / JOB

    def chk(self, n: int) -> Path:
        return self.job_dir / f"chk-{n}"

    def checkpoint_dirs(self) -> list[str]:
        return sorted(p.name for p in self.job_dir.iterdir() if p.name.startswith("chk-"))

    def run_checkpoint(
        self, payloads: Sequence[bytes] = (SMALL,), epoch: int = 1
    ) -> PendingCheckpoint:
        """Trigger, write one keyed state per payload and complete."""
        pending = self.coordinator.trigger(epoch)
        self.coordinator.complete(pending, keyed_operator(pending.location, payloads), MASTER)
        return pending


MASTER = [MasterState.from_json("sparkpoint.job", {"epoch": 1, "sources": {}})]


def keyed_operator(
    location: CheckpointStorageLocation, payloads: Sequence[bytes], op_id: str = "keyed-op"
) -> list[OperatorState]:
    """One keyed operator with one subtask per payload (max parallelism 128)."""
    n = len(payloads)
    per = 128 // n
    subs = {
        i: OperatorSubtaskState(
            managed_keyed_state=(
                keyed_handle(location, p, KeyGroupRange(i * per, (i + 1) * per - 1)),
            )
        )
        for i, p in enumerate(payloads)
    }
    return [OperatorState(op_id, n, 128, subs)]


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


# ---- interval -------------------------------------------------------------------------------


def test_not_due_before_the_interval_since_start(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=1000)
    assert not h.coordinator.is_due()
    h.clock.advance(999)
    assert not h.coordinator.is_due()
    h.clock.advance(1)
    assert h.coordinator.is_due()


def test_periodic_checkpoints_keep_a_fixed_schedule(tmp_path: Path) -> None:
    # Flink's trigger moves nextCheckpointTriggeringRelativeTime on by one interval: a
    # checkpoint triggered late (at the next epoch's planning) does not delay the next.
    h = Harness(tmp_path, interval_ms=1000)
    h.clock.advance(1300)
    pending = h.coordinator.trigger(1)  # due at 1000, triggered at 1300
    h.clock.advance(400)
    h.coordinator.complete(pending, keyed_operator(pending.location, [SMALL]), MASTER)
    h.clock.advance(299)  # 1999
    assert not h.coordinator.is_due()
    h.clock.advance(1)  # 2000: an interval after the first was due
    assert h.coordinator.is_due()
    h.clock.advance(2500)  # 4500: a trigger an interval late or more starts the schedule anew
    pending = h.coordinator.trigger(2)
    h.coordinator.complete(pending, keyed_operator(pending.location, [SMALL]), MASTER)
    h.clock.advance(999)
    assert not h.coordinator.is_due()
    h.clock.advance(1)  # 5500
    assert h.coordinator.is_due()


def test_the_trigger_time_is_the_epochs_planning_when_given(tmp_path: Path) -> None:
    # The job master passes when the epoch's ranges were read: a checkpoint an interval or
    # more late restarts the schedule from its planning, not from its trigger a few ms on.
    h = Harness(tmp_path, interval_ms=1000)
    h.clock.advance(2500)
    planned = h.clock.monotonic_ms()
    h.clock.advance(6)  # the planning's own time
    pending = h.coordinator.trigger(1, triggered_at_ms=planned)
    h.coordinator.complete(pending, keyed_operator(pending.location, [SMALL]), MASTER)
    h.clock.advance(993)  # 999 ms after the planning
    assert not h.coordinator.is_due()
    h.clock.advance(1)
    assert h.coordinator.is_due()
    assert h.coordinator.last_trigger_ms == planned
    # A planning time later than the trigger itself is not taken.
    pending = h.coordinator.trigger(2, triggered_at_ms=h.clock.monotonic_ms() + 500)
    assert h.coordinator.last_trigger_ms == h.clock.monotonic_ms()


def test_disabled_interval_is_never_due(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=-1)
    h.clock.advance(10**9)
    assert not h.coordinator.is_due()
    assert not h.coordinator.policy.enabled


def test_a_savepoint_does_not_move_the_periodic_schedule(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=1000)
    h.clock.advance(600)
    sp = h.coordinator.trigger(1, str(tmp_path / "sp"), is_savepoint=True)
    h.coordinator.complete(sp, keyed_operator(sp.location, [SMALL]), MASTER)
    h.clock.advance(400)  # 1000 since start; the savepoint at 600 is not a periodic trigger
    assert h.coordinator.is_due()


def test_checkpoint_ids_are_consecutive_from_the_first_id(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.coordinator.next_checkpoint_id = 7
    first = h.coordinator.trigger(1)
    second = h.coordinator.trigger(2)
    assert (first.checkpoint_id, second.checkpoint_id) == (7, 8)
    assert (first.epoch, second.epoch) == (1, 2)
    assert h.chk(7).is_dir() and h.chk(8).is_dir()


# ---- min pause ------------------------------------------------------------------------------


def test_min_pause_is_measured_from_the_last_completion(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=1000, min_pause_ms=5000)
    h.clock.advance(1000)
    pending = h.coordinator.trigger(1)  # trigger at 1000
    h.clock.advance(2000)
    h.coordinator.complete(pending, keyed_operator(pending.location, [SMALL]), MASTER)  # 3000
    h.clock.advance(3000)  # 6000: 5000 after the trigger, 3000 after the completion
    assert not h.coordinator.is_due()
    h.clock.advance(1999)  # 7999
    assert not h.coordinator.is_due()
    h.clock.advance(1)  # 8000 = completion + min pause
    assert h.coordinator.is_due()


def test_min_pause_does_not_delay_the_first_checkpoint(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=1000, min_pause_ms=60_000)
    h.clock.advance(1000)
    assert h.coordinator.is_due()


def test_interval_still_applies_when_it_is_longer_than_the_min_pause(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=10_000, min_pause_ms=100)
    h.clock.advance(10_000)
    h.run_checkpoint()  # trigger and completion at 10000
    h.clock.advance(9_999)
    assert not h.coordinator.is_due()
    h.clock.advance(1)
    assert h.coordinator.is_due()


# ---- max concurrent -------------------------------------------------------------------------


def test_no_trigger_while_the_only_slot_is_pending(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=1000, max_concurrent=1)
    h.clock.advance(1000)
    pending = h.coordinator.trigger(1)
    h.clock.advance(60_000)
    assert h.coordinator.pending == [pending]
    assert not h.coordinator.is_due()
    h.coordinator.complete(pending, keyed_operator(pending.location, [SMALL]), MASTER)
    assert h.coordinator.pending == []
    assert h.coordinator.is_due()


def test_two_concurrent_checkpoints_then_full(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=1000, max_concurrent=2)
    h.clock.advance(1000)
    first = h.coordinator.trigger(1)
    h.clock.advance(1000)
    assert h.coordinator.is_due()
    second = h.coordinator.trigger(2)
    h.clock.advance(1000)
    assert not h.coordinator.is_due()
    h.coordinator.complete(first, keyed_operator(first.location, [SMALL]), MASTER)
    assert h.coordinator.is_due()
    assert h.coordinator.pending == [second]


def test_a_pending_savepoint_occupies_a_slot(tmp_path: Path) -> None:
    h = Harness(tmp_path, interval_ms=1000, max_concurrent=1)
    h.coordinator.trigger(1, str(tmp_path / "sp"), is_savepoint=True)
    h.clock.advance(5000)
    assert not h.coordinator.is_due()


def test_no_trigger_while_more_cleanups_than_max_concurrent_are_in_flight(
    tmp_path: Path,
) -> None:
    """Flink's CheckpointRequestDecider (and CheckpointsCleaner's own contract): nothing is
    triggered while the number of checkpoints being cleaned exceeds max concurrency."""

    release = threading.Event()

    class SlowToDiscard(StateObject):
        @property
        def state_size(self) -> int:
            return 1

        def discard(self) -> None:
            release.wait(10)

    cleaner = CheckpointsCleaner(parallel_mode=False)
    try:
        h = Harness(tmp_path, interval_ms=1000, max_concurrent=1, cleaner=cleaner)
        h.clock.advance(1000)
        cleaner.clean_aborted_checkpoint(90, None, [SlowToDiscard()])
        cleaner.clean_aborted_checkpoint(91, None, [SlowToDiscard()])
        assert cleaner.get_number_of_checkpoints_to_clean() == 2
        assert not h.coordinator.is_due()
        release.set()
        assert cleaner.wait_until_idle(10)
        assert h.coordinator.is_due()
    finally:
        release.set()
        cleaner.close()


# ---- timeout --------------------------------------------------------------------------------


@pytest.mark.parametrize("with_cleaner", [False, True], ids=["inline-discard", "cleaner"])
def test_a_checkpoint_completed_after_its_timeout_is_expired_and_removed(
    tmp_path: Path, with_cleaner: bool
) -> None:
    cleaner = CheckpointsCleaner() if with_cleaner else None
    h = Harness(tmp_path, interval_ms=1000, timeout_ms=10_000, cleaner=cleaner)
    h.clock.advance(1000)
    pending = h.coordinator.trigger(3)
    states = keyed_operator(pending.location, [LARGE, SMALL])
    [state_file] = files_under(h.chk(1))  # the large state went to a file in chk-1
    assert (h.chk(1) / state_file).stat().st_size == len(LARGE)
    h.clock.advance(10_001)
    with pytest.raises(CheckpointException) as info:
        h.coordinator.complete(pending, states, MASTER)
    if cleaner is not None:
        assert cleaner.wait_until_idle(10)
        cleaner.close()
    assert info.value.reason is CheckpointFailureReason.CHECKPOINT_EXPIRED
    assert info.value.checkpoint_id == 1
    assert not h.chk(1).exists()
    assert h.checkpoint_dirs() == []
    assert h.coordinator.pending == []
    assert h.store.get_number_of_retained_checkpoints() == 0
    [stats] = h.coordinator.stats
    assert stats.status == "FAILED"
    assert stats.failure is not None and stats.failure.startswith("CHECKPOINT_EXPIRED")
    assert stats.duration_ms == 10_001
    assert h.coordinator.consecutive_failures == 1


def test_a_checkpoint_completed_within_its_timeout_completes(tmp_path: Path) -> None:
    h = Harness(tmp_path, timeout_ms=10_000)
    pending = h.coordinator.trigger(1)
    states = keyed_operator(pending.location, [SMALL])
    h.clock.advance(9_999)
    completed = h.coordinator.complete(pending, states, MASTER)
    assert completed.checkpoint_id == 1
    assert (h.chk(1) / "_metadata").is_file()
    assert h.coordinator.stats[0].status == "COMPLETED"
    assert h.coordinator.stats[0].duration_ms == 9_999


def test_expiry_counts_toward_the_tolerable_failures(tmp_path: Path) -> None:
    h = Harness(tmp_path, timeout_ms=100, tolerable_failures=0)
    pending = h.coordinator.trigger(1)
    h.clock.advance(101)
    with pytest.raises(CheckpointException, match=re.escape(EXCEEDED)) as info:
        h.coordinator.complete(pending, keyed_operator(pending.location, [SMALL]), MASTER)
    assert info.value.reason is CheckpointFailureReason.CHECKPOINT_EXPIRED
    assert not h.chk(1).exists()


# ---- tolerable failures ---------------------------------------------------------------------


def test_second_consecutive_failure_exceeds_a_tolerance_of_one(tmp_path: Path) -> None:
    h = Harness(tmp_path, tolerable_failures=1)
    first = h.coordinator.trigger(1)
    h.coordinator.abort(first, CheckpointFailureReason.CHECKPOINT_DECLINED, "task said no")
    assert h.coordinator.consecutive_failures == 1
    second = h.coordinator.trigger(2)
    with pytest.raises(CheckpointException, match=re.escape(EXCEEDED)) as info:
        h.coordinator.abort(second, CheckpointFailureReason.CHECKPOINT_DECLINED, "again")
    assert info.value.reason is CheckpointFailureReason.CHECKPOINT_DECLINED
    assert info.value.checkpoint_id == 2
    assert h.checkpoint_dirs() == []
    assert [s.status for s in h.coordinator.stats] == ["FAILED", "FAILED"]


def test_a_success_resets_the_failure_counter(tmp_path: Path) -> None:
    h = Harness(tmp_path, tolerable_failures=1)
    h.coordinator.abort(h.coordinator.trigger(1), CheckpointFailureReason.IO_EXCEPTION)
    h.run_checkpoint(epoch=2)
    assert h.coordinator.consecutive_failures == 0
    h.coordinator.abort(h.coordinator.trigger(3), CheckpointFailureReason.IO_EXCEPTION)
    assert h.coordinator.consecutive_failures == 1
    with pytest.raises(CheckpointException, match=re.escape(EXCEEDED)):
        h.coordinator.abort(h.coordinator.trigger(4), CheckpointFailureReason.IO_EXCEPTION)


@pytest.mark.parametrize(
    "reason", [r for r in CheckpointFailureReason if not r.counts_as_failure], ids=lambda r: r.name
)
def test_reasons_that_do_not_count_never_fail_the_job(
    tmp_path: Path, reason: CheckpointFailureReason
) -> None:
    h = Harness(tmp_path, tolerable_failures=0)
    for epoch in range(1, 4):
        h.coordinator.abort(h.coordinator.trigger(epoch), reason)
    assert h.coordinator.consecutive_failures == 0
    assert h.checkpoint_dirs() == []


def test_pre_flight_reasons_are_exactly_the_flagged_ones() -> None:
    pre_flight = {r.name for r in CheckpointFailureReason if r.pre_flight}
    assert pre_flight == {
        "PERIODIC_SCHEDULER_SHUTDOWN",
        "TOO_MANY_CHECKPOINT_REQUESTS",
        "MINIMUM_TIME_BETWEEN_CHECKPOINTS",
        "NOT_ALL_REQUIRED_TASKS_RUNNING",
    }
    assert not any(CheckpointFailureReason[n].counts_as_failure for n in pre_flight)


def test_savepoint_failures_do_not_count(tmp_path: Path) -> None:
    h = Harness(tmp_path, tolerable_failures=0)
    sp = h.coordinator.trigger(1, str(tmp_path / "sp"), is_savepoint=True)
    assert sp.location.exclusive_dir is not None
    sp_dir = Path(sp.location.exclusive_dir)
    assert sp_dir.is_dir()
    h.coordinator.abort(sp, CheckpointFailureReason.CHECKPOINT_DECLINED)
    assert h.coordinator.consecutive_failures == 0
    assert not sp_dir.exists()


def test_abort_all_discards_without_counting(tmp_path: Path) -> None:
    h = Harness(tmp_path, tolerable_failures=0, max_concurrent=3)
    for epoch in (1, 2, 3):
        h.coordinator.trigger(epoch)
    assert h.checkpoint_dirs() == ["chk-1", "chk-2", "chk-3"]
    h.coordinator.abort_all(CheckpointFailureReason.TASK_FAILURE)
    assert h.coordinator.pending == []
    assert h.checkpoint_dirs() == []
    assert h.coordinator.consecutive_failures == 0
    assert [(s.status, s.failure) for s in h.coordinator.stats] == [("FAILED", "TASK_FAILURE")] * 3


def test_a_metadata_write_failure_is_an_io_exception_that_counts(tmp_path: Path) -> None:
    h = Harness(tmp_path, tolerable_failures=1)
    pending = h.coordinator.trigger(1)
    states = keyed_operator(pending.location, [LARGE])
    (h.chk(1) / "_metadata").write_bytes(b"left over")  # never overwritten
    with pytest.raises(CheckpointException) as info:
        h.coordinator.complete(pending, states, MASTER)
    assert info.value.reason is CheckpointFailureReason.IO_EXCEPTION
    assert "already exists" in str(info.value)
    assert not h.chk(1).exists()
    assert h.coordinator.consecutive_failures == 1
    assert h.store.get_number_of_retained_checkpoints() == 0
    assert h.coordinator.stats[0].failure is not None
    assert h.coordinator.stats[0].failure.startswith("IO_EXCEPTION")


def test_a_location_that_cannot_be_created_fails_that_checkpoint_alone(tmp_path: Path) -> None:
    """Flink's trigger failure: the checkpoint is recorded as FAILED and not counted (a
    tolerance of 0 is not exceeded); the next one waits an interval and takes the next id."""
    h = Harness(tmp_path, tolerable_failures=0)
    h.clock.advance(1000)
    h.chk(1).write_text("")  # a file where the checkpoint's directory would go
    with pytest.raises(CheckpointException) as info:
        h.coordinator.trigger(1)
    assert info.value.reason is CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE
    assert "chk-1" in str(info.value)
    assert h.coordinator.pending == [] and h.coordinator.consecutive_failures == 0
    (stats,) = h.coordinator.stats
    assert stats.status == "FAILED" and not stats.is_savepoint
    assert stats.failure is not None and stats.failure.startswith("TRIGGER_CHECKPOINT_FAILURE")
    assert not h.coordinator.is_due()
    h.clock.advance(1000)
    assert h.coordinator.is_due()
    assert h.run_checkpoint().checkpoint_id == 2


def test_the_counter_restarts_after_the_threshold_was_exceeded(tmp_path: Path) -> None:
    """Flink's CheckpointFailureManager calls clearCount() before failing the job: after the
    failover, the job again tolerates ``tolerable_failures`` failures."""
    h = Harness(tmp_path, tolerable_failures=1)
    h.coordinator.abort(h.coordinator.trigger(1), CheckpointFailureReason.CHECKPOINT_DECLINED)
    with pytest.raises(CheckpointException, match=re.escape(EXCEEDED)):
        h.coordinator.abort(h.coordinator.trigger(2), CheckpointFailureReason.CHECKPOINT_DECLINED)
    # the job failed over; one more failure is tolerated again
    h.coordinator.abort(h.coordinator.trigger(3), CheckpointFailureReason.CHECKPOINT_DECLINED)
    assert h.coordinator.consecutive_failures == 1


def test_failure_of_a_checkpoint_older_than_the_last_success_does_not_count(
    tmp_path: Path,
) -> None:
    """Flink counts a failure only when its id is above the last succeeded checkpoint id."""
    h = Harness(tmp_path, tolerable_failures=0, max_concurrent=2)
    older = h.coordinator.trigger(1)
    newer = h.coordinator.trigger(2)
    h.coordinator.complete(newer, keyed_operator(newer.location, [SMALL]), MASTER)
    h.coordinator.abort(older, CheckpointFailureReason.CHECKPOINT_DECLINED)
    assert h.coordinator.consecutive_failures == 0


def test_one_checkpoint_is_counted_once(tmp_path: Path) -> None:
    """Flink counts each failed checkpoint id once, however often it is reported."""
    h = Harness(tmp_path, tolerable_failures=1)
    pending = h.coordinator.trigger(1)
    h.coordinator.abort(pending, CheckpointFailureReason.CHECKPOINT_DECLINED, "subtask 0")
    h.coordinator.abort(pending, CheckpointFailureReason.CHECKPOINT_DECLINED, "subtask 1")
    assert h.coordinator.consecutive_failures == 1


# ---- retention ------------------------------------------------------------------------------


@pytest.mark.parametrize("with_cleaner", [False, True], ids=["inline-discard", "cleaner"])
def test_two_retained_of_five_leaves_exactly_chk4_and_chk5(
    tmp_path: Path, with_cleaner: bool
) -> None:
    cleaner = CheckpointsCleaner() if with_cleaner else None
    h = Harness(tmp_path, num_retained=2, cleaner=cleaner)
    for epoch in range(1, 6):
        h.clock.advance(1000)
        if cleaner is not None:  # a backlog of deletions holds triggers back (as in Flink)
            assert cleaner.wait_until_idle(10)
        assert h.coordinator.is_due()
        h.run_checkpoint([LARGE, SMALL], epoch=epoch)
    if cleaner is not None:
        assert cleaner.wait_until_idle(10)
        cleaner.close()
    assert h.checkpoint_dirs() == ["chk-4", "chk-5"]
    assert sorted(p.name for p in h.job_dir.iterdir()) == [
        "chk-4",
        "chk-5",
        "shared",
        "taskowned",
    ]
    for n in (4, 5):
        names = files_under(h.chk(n))
        assert "_metadata" in names
        assert len(names) == 2  # _metadata and the large state file; the small one is inline
        metadata, _ = load_checkpoint(h.access, str(h.chk(n)))
        assert metadata.checkpoint_id == n
    assert [c.checkpoint_id for c in h.store.get_all_checkpoints()] == [4, 5]


def test_retained_checkpoint_state_is_readable(tmp_path: Path) -> None:
    h = Harness(tmp_path, num_retained=2)
    for epoch in range(1, 4):
        h.run_checkpoint([LARGE, SMALL], epoch=epoch)
    metadata, location = load_checkpoint(h.access, (h.chk(3) / "_metadata").as_uri())
    assert location.external_pointer.endswith(f"{JOB}/chk-3")
    op = metadata.get_operator_state("keyed-op")
    assert op is not None and (op.parallelism, op.max_parallelism) == (2, 128)
    payloads = [
        sub.managed_keyed_state[0].delegate.read_all()  # type: ignore[attr-defined]
        for sub in op.subtask_states.values()
    ]
    assert payloads == [LARGE, SMALL]
    assert metadata.get_master_state("sparkpoint.job") == MASTER[0]


def test_small_state_of_sixteen_subtasks_writes_only_metadata(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.run_checkpoint([bytes([i]) * 2048 for i in range(16)])
    assert files_under(h.chk(1)) == ["_metadata"]
    stats = h.coordinator.stats[0]
    assert (stats.files_written, stats.inline_bytes, stats.state_size) == (0, 16 * 2048, 16 * 2048)


# ---- savepoints -----------------------------------------------------------------------------


def test_savepoint_directory_naming_and_properties(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    target = tmp_path / "savepoints"
    sp = h.coordinator.trigger(4, str(target), is_savepoint=True)
    assert sp.properties.checkpoint_type is CheckpointType.SAVEPOINT
    assert not sp.location.get_location_reference().is_default_reference()
    exclusive = sp.location.exclusive_dir
    assert exclusive is not None
    name = Path(exclusive).name
    assert re.fullmatch(rf"savepoint-{JOB[:6]}-[0-9a-f]{{12}}", name), name
    assert (target / name).is_dir()
    completed = h.coordinator.complete(sp, keyed_operator(sp.location, [LARGE]), MASTER)
    assert completed.external_pointer == exclusive
    names = files_under(target / name)
    assert "_metadata" in names and len(names) == 2  # state file + _metadata: self-contained
    assert h.checkpoint_dirs() == []  # nothing under the job's checkpoint directory
    stats = h.coordinator.stats[0]
    assert stats.is_savepoint and stats.status == "COMPLETED"


def test_stop_with_savepoint_is_synchronous(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    sp = h.coordinator.trigger(1, str(tmp_path / "sp"), is_savepoint=True, synchronous=True)
    assert sp.properties.is_synchronous
    assert sp.properties.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE


def test_savepoint_goes_to_the_default_directory(tmp_path: Path) -> None:
    default = (tmp_path / "default-sp").as_uri()
    h = Harness(tmp_path, savepoint_dir=default)
    sp = h.coordinator.trigger(1, None, is_savepoint=True)
    assert sp.location.exclusive_dir is not None
    assert sp.location.exclusive_dir.startswith(default + "/savepoint-")


def test_savepoint_without_any_target_is_refused(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    with pytest.raises(CheckpointException, match="No savepoint location given") as info:
        h.coordinator.trigger(1, None, is_savepoint=True)
    assert info.value.reason is CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE
    assert isinstance(info.value.__cause__, ValueError)


def test_savepoints_are_never_discarded_by_subsumption(tmp_path: Path) -> None:
    h = Harness(tmp_path, num_retained=1)
    h.run_checkpoint([LARGE], epoch=1)
    sp = h.coordinator.trigger(2, str(tmp_path / "sp"), is_savepoint=True)
    h.coordinator.complete(sp, keyed_operator(sp.location, [LARGE]), MASTER)
    assert sp.location.exclusive_dir is not None
    sp_dir = Path(sp.location.exclusive_dir)
    for epoch in (3, 4, 5):
        h.run_checkpoint([LARGE], epoch=epoch)
    assert h.checkpoint_dirs() == ["chk-5"]
    names = files_under(sp_dir)
    assert "_metadata" in names and len(names) == 2
    assert [c.checkpoint_id for c in h.store.get_all_checkpoints()] == [5]


# ---- statistics -----------------------------------------------------------------------------


def test_stats_count_inline_bytes_and_files(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.clock.advance(1000)
    pending = h.coordinator.trigger(7)
    keyed = keyed_operator(pending.location, [SMALL, LARGE, SMALL, LARGE])
    with pending.location.create_checkpoint_state_output_stream() as out:
        out.write(b"o" * 300)
        op_delegate = out.close_and_get_handle()
    assert isinstance(op_delegate, ByteStreamStateHandle)
    op_handle = OperatorStateHandle(
        {"offsets": OperatorStateHandle.MetaInfo((0,), OperatorStateHandle.Mode.UNION)},
        op_delegate,
    )
    non_keyed = OperatorState(
        "source", 1, 128, {0: OperatorSubtaskState(managed_operator_state=(op_handle,))}
    )
    h.clock.advance(250)
    h.coordinator.complete(pending, [*keyed, non_keyed], MASTER)
    [stats] = h.coordinator.stats
    assert stats.checkpoint_id == 1
    assert stats.epoch == 7
    assert not stats.is_savepoint
    assert stats.status == "COMPLETED"
    assert stats.failure is None
    assert stats.duration_ms == 250
    assert stats.inline_bytes == 2 * len(SMALL) + 300
    assert stats.files_written == 2
    assert stats.state_size == 2 * len(SMALL) + 2 * len(LARGE) + 300
    assert stats.external_pointer == str(h.chk(1).as_uri())
    assert stats.trigger_timestamp_ms == pending.timestamp_ms
    assert len(files_under(h.chk(1))) == 3  # two state files and _metadata


def test_stats_of_file_handles_built_by_the_stream_factory(tmp_path: Path) -> None:
    """FileStateHandle (shared scope, absolute) and RelativeFileStateHandle (exclusive) both
    count as files; ByteStreamStateHandle counts as inline bytes."""
    h = Harness(tmp_path)
    pending = h.coordinator.trigger(1)
    location = pending.location
    assert isinstance(location, FsCheckpointStorageLocation)
    handles: list[StreamStateHandle] = []
    for scope, payload in (
        (CheckpointedStateScope.SHARED, LARGE),
        (CheckpointedStateScope.EXCLUSIVE, LARGE),
        (CheckpointedStateScope.EXCLUSIVE, SMALL),
    ):
        with location.create_checkpoint_state_output_stream(scope) as out:
            out.write(payload)
            handle = out.close_and_get_handle()
        assert handle is not None
        handles.append(handle)
    assert [type(x).__name__ for x in handles] == [
        "FileStateHandle",
        "RelativeFileStateHandle",
        "ByteStreamStateHandle",
    ]
    subs = {
        i: OperatorSubtaskState(
            managed_keyed_state=(
                KeyGroupsStateHandle(KeyGroupRangeOffsets(KeyGroupRange(i, i), (0,)), d, f"{i}"),
            )
        )
        for i, d in enumerate(handles)
    }
    h.coordinator.complete(pending, [OperatorState("op", 3, 128, subs)], MASTER)
    stats = h.coordinator.stats[0]
    assert (stats.files_written, stats.inline_bytes) == (2, len(SMALL))
    assert stats.state_size == 2 * len(LARGE) + len(SMALL)


def test_incremental_stats_count_only_files_uploaded_by_this_checkpoint(tmp_path: Path) -> None:
    """A shared SST reused through a placeholder was written by an earlier checkpoint."""
    h = Harness(tmp_path, num_retained=2)

    def incremental(
        location: CheckpointStorageLocation, cid: int, reuse: FileStateHandle | None
    ) -> tuple[list[OperatorState], FileStateHandle]:
        with location.create_checkpoint_state_output_stream(CheckpointedStateScope.SHARED) as o:
            o.write(bytes([cid]) * 25_000)
            fresh = o.close_and_get_handle()
        assert isinstance(fresh, FileStateHandle)
        shared = [HandleAndLocalPath(fresh, f"{cid}.sst")]
        if reuse is not None:
            shared.append(
                HandleAndLocalPath(PlaceholderStreamStateHandle(reuse.path, reuse.size), "1.sst")
            )
        meta = ByteStreamStateHandle(f"meta-{cid}", b"m" * 10)
        handle = IncrementalRemoteKeyedStateHandle(
            "backend", KeyGroupRange(0, 127), cid, tuple(shared), (), meta
        )
        subs = {0: OperatorSubtaskState(managed_keyed_state=(handle,))}
        return [OperatorState("op", 1, 128, subs)], fresh

    first = h.coordinator.trigger(1)
    states, sst1 = incremental(first.location, 1, None)
    h.coordinator.complete(first, states, MASTER)
    second = h.coordinator.trigger(2)
    states, _ = incremental(second.location, 2, sst1)
    h.coordinator.complete(second, states, MASTER)
    s1, s2 = h.coordinator.stats
    assert (s1.files_written, s1.inline_bytes) == (1, 10)
    assert s2.inline_bytes == 10
    assert s2.files_written == 1  # 2.sst only; 1.sst was uploaded by checkpoint 1


def test_stats_are_kept_per_checkpoint_in_order(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_concurrent=2)
    h.run_checkpoint(epoch=1)
    failed = h.coordinator.trigger(2)
    h.coordinator.abort(failed, CheckpointFailureReason.CHECKPOINT_DECLINED, "subtask 3")
    h.run_checkpoint(epoch=3)
    assert [(s.checkpoint_id, s.status, s.epoch) for s in h.coordinator.stats] == [
        (1, "COMPLETED", 1),
        (2, "FAILED", 2),
        (3, "COMPLETED", 3),
    ]
    assert h.coordinator.stats[1].failure == "CHECKPOINT_DECLINED: subtask 3"
    assert h.coordinator.last_success_id == 3


def test_an_incremental_checkpoint_reads_back(tmp_path: Path) -> None:
    """What the coordinator wrote must be restorable: an incremental handle over all 128 key
    groups with a few shared files (fewer than 1024 bytes after its range in _metadata)."""
    h = Harness(tmp_path)
    pending = h.coordinator.trigger(1)
    with pending.location.create_checkpoint_state_output_stream(
        CheckpointedStateScope.SHARED
    ) as out:
        out.write(LARGE)
        sst = out.close_and_get_handle()
    assert isinstance(sst, FileStateHandle)
    handle = IncrementalRemoteKeyedStateHandle(
        "rocksdb",
        KeyGroupRange(0, 127),
        1,
        (HandleAndLocalPath(sst, "000001.sst"),),
        (),
        ByteStreamStateHandle("meta", b"m" * 10),
    )
    subs = {0: OperatorSubtaskState(managed_keyed_state=(handle,))}
    h.coordinator.complete(pending, [OperatorState("op", 1, 128, subs)], MASTER)
    metadata, _ = load_checkpoint(h.access, str(h.chk(1)))
    op = metadata.get_operator_state("op")
    assert op is not None
    assert op.subtask_states[0].managed_keyed_state == (handle,)
