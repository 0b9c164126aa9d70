"""A deadline for the first run after a restore: a task that restores state and is still
running after ``sparkpoint.restart.restore-timeout`` ends its Python worker (its stacks on
stderr, exit code 1), so a hang a snapshot causes (a crafted pickle that never finishes
decoding, a state file that blocks) becomes a worker crash, which the driver counts against
``sparkpoint.restart.restore-attempts`` instead of waiting forever.

``faulthandler``'s watchdog is a C thread: it fires even while the hang holds the GIL inside
C code, where no Python thread could run. It is one per process, so it is not armed when
PySpark's periodic traceback dump (``spark.python.worker.tracebackDumpIntervalSeconds``)
uses it.
"""

from __future__ import annotations

import faulthandler
import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["restore_watchdog"]

_PYSPARK_DUMPS = "PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS"


@contextmanager
def restore_watchdog(timeout_s: float | None) -> Iterator[None]:
    """End this process if the body runs longer than ``timeout_s`` seconds (None or 0:
    no deadline)."""
    if not timeout_s or os.environ.get(_PYSPARK_DUMPS, "0") not in ("", "0"):
        yield
        return
    faulthandler.dump_traceback_later(timeout_s, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
