"""Garbage collection around tasks: the full pass every FULL_EVERY tasks runs after the
task, once the worker is idle, never inside a task (no Spark)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

from sparkpoint.runtime.task import gc_policy


def test_the_full_collection_runs_between_tasks_not_inside_one() -> None:
    full_passes: list[tuple[str, bool]] = []  # (thread, whether a task body was running)
    in_task = threading.Event()

    def observe(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            full_passes.append((threading.current_thread().name, in_task.is_set()))

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    gc.callbacks.append(observe)
    try:
        gc_policy._tasks_since_full = 0
        before = gc_policy._FULL.passes
        for i in range(gc_policy.FULL_EVERY):
            with gc_policy.collect_after_task():
                in_task.set()
                Cycle()  # garbage only a collection frees
                if i == gc_policy.FULL_EVERY - 1:
                    time.sleep(0.2)  # the last task is long: nothing full runs meanwhile
                in_task.clear()
        assert gc.isenabled()
        assert not [p for p in full_passes if p[0] == "sparkpoint-gc"]  # not at the task's end
        deadline = time.monotonic() + 5
        while gc_policy._FULL.passes == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gc_policy._FULL.passes == before + 1
        # One by the collector, none inside a task (Python may run automatic ones between).
        assert [p for p in full_passes if p[0] == "sparkpoint-gc"] == [("sparkpoint-gc", False)]
        assert not [p for p in full_passes if p[1]]
        # The next task starts a new count: no further full pass after one task.
        with gc_policy.collect_after_task():
            pass
        time.sleep(3 * gc_policy.IDLE_BEFORE_FULL_S)
        assert gc_policy._FULL.passes == before + 1
    finally:
        gc.callbacks.remove(observe)


def test_a_due_full_collection_waits_while_a_task_runs() -> None:
    gc_policy._tasks_since_full = gc_policy.FULL_EVERY - 1
    before = gc_policy._FULL.passes
    with gc_policy.collect_after_task():
        pass  # the full pass is due now
    # Another task starts at once (as the next epoch's would) and runs for a while.
    with gc_policy.collect_after_task():
        time.sleep(0.3)
        assert gc_policy._FULL.passes == before
    deadline = time.monotonic() + 5
    while gc_policy._FULL.passes == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gc_policy._FULL.passes == before + 1
