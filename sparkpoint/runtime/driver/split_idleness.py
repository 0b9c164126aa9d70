"""Idle source splits and the combined watermark, as Flink's ``WatermarkOutputMultiplexer``
with ``WatermarkStrategy.with_idleness``: a split that had no record for the idle timeout
is left out of the minimum watermark until it reads again, and the combined watermark never
goes back (when every split is idle it stays where it was).

A task of a source stage reads one split, so every split's watermark is its own entry
(``operator@split``) of the job's watermarks; the driver decides idleness with its clock,
since a split with nothing to read gets no task at all.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkpoint.clock import Clock
from sparkpoint.connectors.source import SplitRange
from sparkpoint.runtime.graph import Plan

__all__ = ["SplitIdleness"]


class SplitIdleness:
    """When each split of each source stage last had records to read, and which watermark
    entries are idle now."""

    def __init__(self, plan: Plan, clock: Clock) -> None:
        self._clock = clock
        # source stage id -> (timestamp operators with an idle timeout, the timeout in ms)
        self._timeouts: dict[int, list[tuple[str, int]]] = {}
        for stage in plan.stages:
            if stage.source is None:
                continue
            ops = [
                (node.operator_id, int(timeout))
                for node in [stage.source, *stage.members]
                if node.watermark_strategy is not None
                and (timeout := _idle_timeout_ms(node.watermark_strategy)) is not None
            ]
            if ops:
                self._timeouts[stage.id] = ops
        self._last_active: dict[int, dict[str, int]] = {s: {} for s in self._timeouts}
        self._idle: frozenset[str] = frozenset()

    def observe(
        self, ranges: Mapping[int, list[SplitRange]], splits: Mapping[int, list[str]]
    ) -> None:
        """An epoch is planned to read ``ranges`` (source stage id -> ranges); ``splits``
        are every split of each source stage. A split with a range is active now; one first
        seen starts its idle timer now (as Flink's ``IdlenessTimer``)."""
        if not self._timeouts:
            return
        now = self._clock.monotonic_ms()
        idle: set[str] = set()
        for stage_id, ops in self._timeouts.items():
            last = self._last_active[stage_id]
            reading = {r.split_id for r in ranges.get(stage_id, []) if r.end != r.start}
            for split_id in splits.get(stage_id, []):
                if split_id in reading or split_id not in last:
                    last[split_id] = now
                for op_id, timeout in ops:
                    if now - last[split_id] >= timeout:
                        idle.add(f"{op_id}@{split_id}")
        self._idle = frozenset(idle)

    def idle_keys(self) -> frozenset[str]:
        """The watermark entries (``operator@split``) idle in the epoch last observed."""
        return self._idle

    def reset(self) -> None:
        """After a restore every split starts its idle timer again."""
        for last in self._last_active.values():
            last.clear()
        self._idle = frozenset()


def _idle_timeout_ms(strategy: object) -> int | None:
    get = getattr(strategy, "get_idle_timeout_ms", None)
    return get() if callable(get) else None
