"""When the next epoch starts: at once under heavy input, once per epoch interval under sparse
input, and with no input only when the job needs an epoch, so an idle job costs ~nothing.

The epoch interval is ``sparkpoint.epoch.interval`` if set. Unset, it is the checkpoint
interval (1 s without checkpoints): an exactly-once sink publishes an epoch's output only
when a checkpoint covers it, and every epoch costs a Spark job in the ``job`` mode. In the
``long-running`` mode, when no sink waits for checkpoints to publish (at-least-once and
non-transactional sinks, or checkpointing off or ``AT_LEAST_ONCE``), it is Flink's
``execution.buffer-timeout`` (100 ms): records reach such sinks within about that time, as
Flink's network buffers are flushed, at ~10-20 ms of CPU per epoch. The ``auto`` mode is
paced as the mode it runs epochs in at the time.

Heavy input is a split with ``sparkpoint.epoch.max-records-per-split`` records waiting (or a
source that does not count a range's records). Sparse input waits for the next time on a
fixed schedule of ``sparkpoint.epoch.interval`` (the checkpoint interval by default; the
checkpoint coordinator keeps the same schedule, as Flink's periodic trigger does, and a
checkpoint's trigger time is its epoch's planning, so the two agree), or until the records
waiting would take ``sparkpoint.epoch.target-duration`` to process (``epoch_sizing.py``:
heavy steady input then runs epochs of about that length, or back to back near the job's
maximum, between checkpoints, not one epoch holding a whole interval of input). With no
input, an empty epoch runs when an asynchronous checkpoint waits for its uploads, when a due
checkpoint has something to capture (an epoch changed the job after the latest completed
checkpoint), or every ``sparkpoint.epoch.idle-interval`` (by default every second, and only
for jobs whose operators act on time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkpoint.clock import Clock
from sparkpoint.connectors.source import SplitRange
from sparkpoint.runtime.driver.coordinator import next_due_on_schedule
from sparkpoint.runtime.driver.epoch_sizing import EpochCosts
from sparkpoint.runtime.driver.settings import JobSettings
from sparkpoint.runtime.graph import NodeKind, Plan

__all__ = [
    "EpochPacer",
    "acts_on_time",
    "epoch_interval_ms",
    "epoch_target_ms",
    "publishes_on_checkpoints",
]

_TIME_DRIVEN_IDLE_MS = 1000  # idle epochs of a job with operators that act on time
_LEAST_TARGET_MS = 200  # the default target duration: a quarter of the interval, at least this
# Kinds whose operators may register processing-time timers or act on watermarks or time.
_TIME_KINDS = frozenset(
    {
        NodeKind.PROCESS,
        NodeKind.KEYED_PROCESS,
        NodeKind.WINDOW,
        NodeKind.CO_PROCESS,
        NodeKind.KEYED_CO_PROCESS,
        NodeKind.BROADCAST_PROCESS,
        NodeKind.KEYED_BROADCAST_PROCESS,
        NodeKind.ASYNC_WAIT,
        NodeKind.TIMESTAMPS,
    }
)


def acts_on_time(plan: Plan) -> bool:
    """Whether an empty epoch can change the job: a timer may be due, or a watermark may
    advance (process functions, windows, async I/O, watermark strategies). Keyed map,
    flat_map and filter, reduce and co_map/co_flat_map only act on records."""
    for node in plan.nodes:
        if node.watermark_strategy is not None:
            return True
        if node.kind not in _TIME_KINDS:
            continue
        if node.kind is NodeKind.KEYED_PROCESS and node.element_call is not None:
            continue  # a keyed map/flat_map/filter
        if node.kind is NodeKind.KEYED_CO_PROCESS and node.co_kind is not NodeKind.CO_PROCESS:
            continue
        return True
    return False


def publishes_on_checkpoints(plan: Plan, settings: JobSettings) -> bool:
    """Whether a sink of the job publishes only when a checkpoint completes."""
    policy = settings.policy
    if not policy.enabled or policy.at_least_once:
        return False
    return any(getattr(node.sink, "transactional", True) for node in plan.sinks)


def epoch_interval_ms(plan: Plan, settings: JobSettings, long_running: bool) -> int:
    """The least time between epoch starts under sparse input (see the module's doc), for
    epochs run in long-running tasks or as Spark jobs."""
    if (
        not settings.epoch_interval_set
        and long_running
        and settings.buffer_timeout_ms >= 0
        and not publishes_on_checkpoints(plan, settings)
    ):
        return settings.buffer_timeout_ms
    return settings.epoch_interval_ms


def epoch_target_ms(interval_ms: int, settings: JobSettings) -> int:
    """``sparkpoint.epoch.target-duration``, or by default a quarter of the epoch interval
    and at least 200 ms (0: epochs are not sized)."""
    if settings.epoch_target_ms is not None:
        return settings.epoch_target_ms
    return max(_LEAST_TARGET_MS, interval_ms // 4)


class EpochPacer:
    """Decides, each time the job master has planned the next epoch's ranges, whether the
    epoch runs now or how long to wait before looking again."""

    def __init__(self, plan: Plan, settings: JobSettings, clock: Clock) -> None:
        self._clock = clock
        self._settings = settings
        self._intervals_ms = {
            mode: epoch_interval_ms(plan, settings, mode) for mode in (False, True)
        }
        self._long_running = settings.epoch_mode != "job"
        self._interval_ms = self._intervals_ms[self._long_running]
        self._max_records = settings.max_records_per_split
        self._poll_s = settings.idle_sleep_s
        self._time_driven = acts_on_time(plan)
        target_ms = epoch_target_ms(self._interval_ms, settings)
        self._costs = EpochCosts(target_ms) if target_ms > 0 else None
        idle = settings.idle_epoch_interval_ms
        self.idle_interval_ms = (
            idle if idle is not None else (_TIME_DRIVEN_IDLE_MS if self._time_driven else None)
        )
        now = clock.monotonic_ms()
        self._last_start_ms = now
        self._next_paced_ms = now  # the first epoch need not wait
        self._last_end_ms = now
        self._changed_epoch = 0  # the latest epoch that may have changed state or output

    def runs_long_running(self, long_running: bool) -> None:
        """Pace the next epochs for the mode they run in now (the ``auto`` mode switches
        between long-running tasks and a Spark job per epoch): the interval, and the
        default target duration that follows it. The epoch costs measured so far are
        forgotten on a switch: they were the other mode's."""
        if long_running == self._long_running:
            return
        self._long_running = long_running
        self._interval_ms = self._intervals_ms[long_running]
        target_ms = epoch_target_ms(self._interval_ms, self._settings)
        self._costs = EpochCosts(target_ms) if target_ms > 0 else None

    def epoch_started(self, planned_at_ms: int | None = None) -> None:
        """An epoch starts, planned (its ranges read) at ``planned_at_ms`` (default now).
        Sparse input keeps a fixed schedule, as the checkpoint coordinator's periodic
        triggers do: an epoch that starts late (the driver woke a few ms after its time)
        does not delay the next, one that starts early (heavy input, sized epochs) starts
        the schedule anew, and so does one an interval late or more."""
        at = self._clock.monotonic_ms() if planned_at_ms is None else planned_at_ms
        self._last_start_ms = at
        self._next_paced_ms = next_due_on_schedule(self._next_paced_ms, at, self._interval_ms)

    def epoch_accepted(self, epoch: int, records_in: int) -> None:
        """``epoch`` ended having read ``records_in`` records."""
        self._last_end_ms = self._clock.monotonic_ms()
        if self._costs is not None:
            self._costs.observe(records_in, self._last_end_ms - self._last_start_ms)
        if records_in > 0 or self._time_driven:
            self._changed_epoch = epoch

    def wait_s(
        self,
        ranges: Mapping[int, Sequence[SplitRange]],
        checkpoint_due: bool,
        checkpointed_epoch: int,
        uploads_pending: bool,
    ) -> float:
        """0 when the epoch planned as ``ranges`` runs now, else how long to wait before
        planning again. ``checkpointed_epoch`` is the epoch the latest completed checkpoint
        covers; ``uploads_pending`` whether a checkpoint waits for uploads a later epoch
        reports."""
        now = self._clock.monotonic_ms()
        until_paced_ms = self._next_paced_ms - now
        if any(ranges.values()):
            if until_paced_ms <= 0 or self._heavy(ranges):
                return 0.0
            until_sized_ms = self._until_sized_ms(ranges, now)
            if until_sized_ms <= 0:
                return 0.0
            return min(self._poll_s, until_paced_ms / 1000, until_sized_ms / 1000)
        if uploads_pending and until_paced_ms <= 0:
            return 0.0
        if checkpoint_due and self._changed_epoch > checkpointed_epoch:
            return 0.0
        idle = self.idle_interval_ms
        if idle is not None and now - self._last_end_ms >= idle:
            return 0.0
        return self._poll_s

    def _until_sized_ms(self, ranges: Mapping[int, Sequence[SplitRange]], now: int) -> float:
        """How long until the records waiting would take the target duration to process
        (0: they would now; ``epoch_sizing.py``), at the rate they arrived since the latest
        planning; infinite when epochs are not sized or the fit does not tell."""
        if self._costs is None:
            return float("inf")
        limit = self._costs.records_within_target() or self._costs.probe_records()
        if limit is None:
            return float("inf")
        waiting = sum(r.records or 0 for split_ranges in ranges.values() for r in split_ranges)
        if waiting >= limit:
            return 0.0
        elapsed_ms = max(1, now - self._last_start_ms)
        return (limit - waiting) * elapsed_ms / max(1, waiting)

    def _heavy(self, ranges: Mapping[int, Sequence[SplitRange]]) -> bool:
        """Whether a split has a full range waiting (a range of unknown size counts as
        full: its source cannot tell, so it is read at once, as before pacing)."""
        return any(
            r.records is None or r.records >= self._max_records
            for split_ranges in ranges.values()
            for r in split_ranges
        )
