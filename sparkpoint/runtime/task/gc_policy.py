"""Cyclic garbage collection in tasks: none while a task runs, the young generations after
it, and a full pass every ``FULL_EVERY`` tasks of the Python worker.

A worker that holds large keyed state (heap tables, timer maps: millions of containers)
makes every automatic full collection scan all of it, and a task that allocates a lot
(timers registered and fired, records decoded) triggers several. Objects that die during a
task are freed by reference counting; only cycles wait for the task's end.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FULL_EVERY", "collect_after_task"]

FULL_EVERY = 16
_tasks_since_full = 0


@contextmanager
def collect_after_task() -> Iterator[None]:
    """Run the body with automatic collection off (unless it was off already), then collect
    the young generations, and everything every ``FULL_EVERY`` tasks."""
    global _tasks_since_full
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        _tasks_since_full += 1
        if _tasks_since_full >= FULL_EVERY:
            _tasks_since_full = 0
            gc.collect()
        else:
            gc.collect(1)
        gc.enable()
