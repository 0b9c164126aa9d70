"""Cyclic garbage collection in tasks: none while a task runs, the young generations after
it, and a full pass every ``FULL_EVERY`` tasks of the Python worker, run by a background
thread once the worker has been idle for ``IDLE_BEFORE_FULL_S``.

A worker that holds large keyed state (heap tables, timer maps: millions of containers)
makes every automatic full collection scan all of it, and a task that allocates a lot
(timers registered and fired, records decoded) triggers several. Objects that die during a
task are freed by reference counting; only cycles wait for the task's end. A full pass
scans everything the worker holds (~0.2 s at 50,000 keys of heap state, measured in
``bench/kafka_epoch_breakdown.py``): run at the end of a task it delayed that task's
results, so one epoch in every few took that much longer; between tasks it overlaps the
time the worker waits for the next epoch. A task that starts while a pass runs waits for
it, as it did before.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FULL_EVERY", "IDLE_BEFORE_FULL_S", "collect_after_task", "full_collections"]

FULL_EVERY = 16
IDLE_BEFORE_FULL_S = 0.05


class _FullCollector:
    """Runs a due full collection in a daemon thread once no task has run for
    ``IDLE_BEFORE_FULL_S``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._last_end = 0.0
        self._due = False
        self._pid = -1
        self.passes = 0  # full collections run

    def task_started(self) -> None:
        with self._cond:
            self._running += 1

    def task_ended(self, full_due: bool) -> None:
        with self._cond:
            self._running -= 1
            self._last_end = time.monotonic()
            if full_due:
                self._due = True
                if self._pid != os.getpid():  # none yet in this process (or forked)
                    self._pid = os.getpid()
                    threading.Thread(target=self._run, name="sparkpoint-gc", daemon=True).start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._due or self._running:
                        self._cond.wait()
                        continue
                    idle = time.monotonic() - self._last_end
                    if idle >= IDLE_BEFORE_FULL_S:
                        break
                    self._cond.wait(IDLE_BEFORE_FULL_S - idle)
                self._due = False
            gc.collect()
            self.passes += 1


_FULL = _FullCollector()
_tasks_since_full = 0


def full_collections() -> int:
    """Full collections the background thread has run in this process."""
    return _FULL.passes


@contextmanager
def collect_after_task() -> Iterator[None]:
    """Run the body with automatic collection off (unless it was off already), then collect
    the young generations; every ``FULL_EVERY`` tasks a full collection follows once the
    worker is idle."""
    global _tasks_since_full
    if not gc.isenabled():
        yield
        return
    gc.disable()
    _FULL.task_started()
    full_due = False
    try:
        yield
    finally:
        _tasks_since_full += 1
        if _tasks_since_full >= FULL_EVERY:
            _tasks_since_full = 0
            full_due = True
        gc.collect(1)
        gc.enable()
        _FULL.task_ended(full_due)
