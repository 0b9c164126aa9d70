"""Garbage collection around tasks: the full pass every FULL_EVERY tasks runs after the
task, once the worker is idle, never inside a task (no Spark)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

from sparkpoint.runtime.task.gc_policy import (
    FULL_EVERY,
    IDLE_BEFORE_FULL_S,
    collect_after_task,
    full_collections,
)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _wait_for_passes(count: int) -> int:
    deadline = time.monotonic() + 5
    while full_collections() < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return full_collections()


def test_the_full_collection_runs_between_tasks_not_inside_one() -> None:
    """FULL_EVERY tasks back to back (one of them is due a full pass), the last one long:
    no full pass runs until the worker is idle, then exactly one, in the background."""
    full_passes: list[tuple[str, bool]] = []  # (thread, whether a task body was running)
    in_task = threading.Event()

    def observe(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            full_passes.append((threading.current_thread().name, in_task.is_set()))

    gc.callbacks.append(observe)
    try:
        before = full_collections()
        for i in range(FULL_EVERY):
            with collect_after_task():
                in_task.set()
                _Cycle()  # garbage only a collection frees
                if i == FULL_EVERY - 1:
                    time.sleep(0.3)
                    assert full_collections() == before  # not while a task runs
                in_task.clear()
        assert gc.isenabled()
        assert _wait_for_passes(before + 1) == before + 1
        # One by the collector, none inside a task (Python may run automatic ones between).
        assert [p for p in full_passes if p[0] == "sparkpoint-gc"] == [("sparkpoint-gc", False)]
        assert not [p for p in full_passes if p[1]]
        time.sleep(3 * IDLE_BEFORE_FULL_S)
        assert full_collections() == before + 1  # one per FULL_EVERY tasks, not per idle spell
    finally:
        gc.callbacks.remove(observe)
