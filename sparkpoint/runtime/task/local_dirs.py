"""Where an executor keeps keyed working state, and how it is removed.

Each executor has its own root, ``<base>/sparkpoint-state/<application>/<executor>``, so no
two executors ever share state by path (not even on one host): ``<base>`` is the first of
the executor's Spark local directories (``SPARK_LOCAL_DIRS``, which Spark gives every Python
worker and deletes when the executor stops) or ``sparkpoint.local-state.dir`` when set.
Below it, ``<job>/<operator>/<subtask>`` per keyed subtask.

Removal happens on the executors, since the driver cannot reach other hosts' disks: the job
master runs a cleanup task on every executor when a job ends, and the first task of every
Python worker sweeps the roots of executors that died (a crashed run): each root registers
its executor JVM (pid and start time) in a host-wide directory, and a root whose JVM is gone
is deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid

from sparkpoint.runtime.task.executor import current_executor, executor_jvm, process_alive

__all__ = ["executor_root", "remove_job", "sweep_dead_roots"]

_OWNERS = "sparkpoint-local-state-owners"
_registered: set[str] = set()


def _base(override: str | None) -> str:
    if override:
        return override
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    first = local_dirs.split(",")[0].strip()
    return first or tempfile.gettempdir()


def _safe(part: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part) or "_"


def executor_root(application_id: str, override: str | None) -> str:
    """This executor's local-state root (registered on first use, see the module doc)."""
    executor = current_executor()
    root = os.path.join(
        _base(override), "sparkpoint-state", _safe(application_id), _safe(executor.executor_id)
    )
    if root not in _registered:
        os.makedirs(root, exist_ok=True)
        _register(root)
        sweep_dead_roots()
        _registered.add(root)
    return root


def _owners_dir() -> str:
    return os.path.join(tempfile.gettempdir(), _OWNERS)


def _register(root: str) -> None:
    jvm = executor_jvm()
    if jvm is None:
        return  # no /proc: crash leftovers cannot be told from live state
    directory = _owners_dir()
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha1(root.encode()).hexdigest()[:16] + ".json"
    path = os.path.join(directory, name)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"root": root, "pid": jvm[0], "start": jvm[1]}, f)
    os.replace(tmp, path)


def sweep_dead_roots() -> list[str]:
    """Delete the local-state roots whose executor JVM no longer runs on this host;
    returns the roots deleted."""
    directory = _owners_dir()
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    removed = []
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                owner = json.load(f)
            root, pid, start = str(owner["root"]), int(owner["pid"]), int(owner["start"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if process_alive(pid, start):
            continue
        shutil.rmtree(root, ignore_errors=True)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        removed.append(root)
    return removed


def job_dir(application_id: str, override: str | None, job_id: str) -> str:
    """This executor's local directory of ``job_id``."""
    return os.path.join(executor_root(application_id, override), job_id)


def remove_job(application_id: str, override: str | None, job_id: str) -> bool:
    """Delete this executor's local state of ``job_id``; returns whether there was any."""
    path = job_dir(application_id, override, job_id)
    existed = os.path.isdir(path)
    shutil.rmtree(path, ignore_errors=True)
    return existed
