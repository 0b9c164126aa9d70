"""Who runs a task: the Spark executor of the current Python worker, found once per process.

PySpark tells a Python worker nothing about its executor, but the worker is a descendant
of the executor's JVM, whose command line names it (``--executor-id N --hostname H``, on
every cluster manager). A worker whose ancestors name no executor runs in the driver's JVM
(local mode): executor ``driver``.
"""

from __future__ import annotations

import os
import socket

from sparkpoint.runtime.protocol import ExecutorIdentity

__all__ = [
    "DRIVER_EXECUTOR_ID",
    "current_executor",
    "executor_jvm",
    "process_alive",
    "process_start_time",
]

DRIVER_EXECUTOR_ID = "driver"
_MAX_DEPTH = 8
_cached: tuple[int, ExecutorIdentity, tuple[int, int] | None] | None = None


def _cmdline(pid: int) -> list[bytes]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")


def _stat(pid: int) -> tuple[int, int]:
    """(parent pid, start time in clock ticks) of ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[19])


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if it is gone or unknown."""
    try:
        return _stat(pid)[1]
    except (OSError, ValueError, IndexError):
        return None


def process_alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (not a reused pid)."""
    return process_start_time(pid) == start


def _arg(cmd: list[bytes], name: bytes) -> str | None:
    if name in cmd:
        i = cmd.index(name)
        if i + 1 < len(cmd):
            return cmd[i + 1].decode()
    return None


def _discover() -> tuple[ExecutorIdentity, tuple[int, int] | None]:
    pid = os.getpid()
    host = os.environ.get("SPARK_LOCAL_IP") or socket.gethostname()
    jvm: tuple[int, int] | None = None
    try:
        current = pid
        for _ in range(_MAX_DEPTH):
            cmd = _cmdline(current)
            parent, started = _stat(current)
            if cmd and os.path.basename(cmd[0]).startswith(b"java"):
                jvm = (current, started)
                executor_id = _arg(cmd, b"--executor-id")
                if executor_id is not None:
                    host = _arg(cmd, b"--hostname") or host
                    return ExecutorIdentity(executor_id, host, pid), jvm
                break  # the driver's JVM: local mode
            if parent <= 1:
                break
            current = parent
    except (OSError, ValueError, IndexError):
        pass  # no /proc (not Linux): the executor cannot be named
    return ExecutorIdentity(DRIVER_EXECUTOR_ID, host, pid), jvm


def _load() -> tuple[ExecutorIdentity, tuple[int, int] | None]:
    global _cached
    pid = os.getpid()
    if _cached is None or _cached[0] != pid:  # forked workers find their own
        identity, jvm = _discover()
        _cached = (pid, identity, jvm)
    return _cached[1], _cached[2]


def current_executor() -> ExecutorIdentity:
    """The executor this Python worker belongs to (cached per process)."""
    return _load()[0]


def executor_jvm() -> tuple[int, int] | None:
    """(pid, start time) of the JVM this worker belongs to, if it could be found."""
    return _load()[1]
