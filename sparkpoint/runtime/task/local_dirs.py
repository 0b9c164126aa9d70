"""Where an executor keeps keyed working state, and how it is removed.

Each executor has its own root, ``<base>/sparkpoint-state/<application>/<executor>``, so no
two executors ever share state by path (not even on one host): ``<base>`` is the first of
the executor's Spark local directories (``SPARK_LOCAL_DIRS``, which Spark gives every Python
worker and deletes when the executor stops) or ``sparkpoint.local-state.dir`` when set.
Below it, ``<job>/<operator>/<subtask>`` per keyed subtask.

Removal happens on the executors, since the driver cannot reach other hosts' disks: the job
master runs a cleanup task on every executor when a job ends, and the first task of every
Python worker sweeps the roots of executors that died (a crashed run): each root registers
its executor JVM (pid and start time) in its user's owner directory
(``<tmp>/sparkpoint-local-state-owners-<uid>``, mode 0700), and a root whose JVM is gone is
deleted.

The host is shared with other users, so nothing here trusts the file system: the owner
directory is used only when it is a real directory of this user with mode 0700; a record is
read only when it is a regular file of this user; and a root is removed only when it has
the exact form above and every directory from ``sparkpoint-state`` down is a real directory
(no symlink) owned by this user. ``<base>/sparkpoint-state`` is created sticky and
world-writable (as ``/tmp``), so users who share a base each keep their own 0700
``<application>`` directories in it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
import uuid
from hashlib import sha1

from sparkpoint.runtime.task.executor import current_executor, executor_jvm, process_alive

__all__ = ["executor_root", "is_state_root", "owners_dir", "remove_job", "sweep_dead_roots"]

_LOG = logging.getLogger("sparkpoint.task")
_STATE = "sparkpoint-state"
_OWNERS = "sparkpoint-local-state-owners"
_MAX_RECORD = 4096  # bytes: a record is one short JSON object
_registered: set[str] = set()
_warned: set[str] = set()


def _base(override: str | None) -> str:
    if override:
        return override
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    first = local_dirs.split(",")[0].strip()
    return first or tempfile.gettempdir()


def _safe(part: str) -> str:
    """``part`` as one path component: letters, digits and ``._-`` only, never ``.`` or ``..``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in part)
    return "_" if safe in ("", ".", "..") else safe


def _is_component(part: str) -> bool:
    return bool(part) and _safe(part) == part


def is_state_root(path: str) -> bool:
    """Whether ``path`` has the exact form of a root: absolute, normalised,
    ``<base>/sparkpoint-state/<application>/<executor>`` with plain components."""
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        return False
    rest, executor = os.path.split(path)
    rest, application = os.path.split(rest)
    base, state = os.path.split(rest)
    if state != _STATE or base == os.path.dirname(base):  # no base: the path is /sparkpoint-state/…
        return False
    return _is_component(application) and _is_component(executor)


def _mine(st: os.stat_result) -> bool:
    """A real directory (``st`` from lstat) owned by this user."""
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def _private_dir(path: str, mode: int = 0o700) -> None:
    """Create ``path`` (parent must exist) or accept it if it is already a real directory of
    this user; raise ``PermissionError`` naming it otherwise."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not _mine(st):
        raise PermissionError(
            f"sparkpoint local state: {path} is not a directory owned by uid {os.geteuid()} "
            f"(owner uid {st.st_uid}, {'symlink' if stat.S_ISLNK(st.st_mode) else 'mode'} "
            f"{stat.filemode(st.st_mode)}); refusing to keep state there"
        )


def _shared_state_dir(path: str) -> None:
    """``<base>/sparkpoint-state``: made sticky and world-writable when this user creates it,
    so that other users sharing the base can add their own application directories."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise PermissionError(
                f"sparkpoint local state: {path} is not a directory; refusing to keep state there"
            ) from None
        return
    os.chmod(path, 0o1777)


def executor_root(application_id: str, override: str | None) -> str:
    """This executor's local-state root (registered on first use, see the module doc)."""
    executor = current_executor()
    base = _base(override)
    state = os.path.join(base, _STATE)
    application = os.path.join(state, _safe(application_id))
    root = os.path.join(application, _safe(executor.executor_id))
    if root not in _registered:
        os.makedirs(base, exist_ok=True)
        _shared_state_dir(state)
        _private_dir(application)
        _private_dir(root)
        _register(os.path.abspath(root))
        sweep_dead_roots()
        _registered.add(root)
    return root


def owners_dir() -> str:
    """This user's directory of owner records (one per registered root)."""
    return os.path.join(tempfile.gettempdir(), f"{_OWNERS}-{os.geteuid()}")


def _usable_owners_dir(create: bool) -> str | None:
    """The owner directory if it is a real 0700 directory of this user (created when
    ``create``); None (with one warning) when it exists but is not."""
    directory = owners_dir()
    if create:
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return None
    if _mine(st) and stat.S_IMODE(st.st_mode) & 0o077 == 0:
        return directory
    if directory not in _warned:
        _warned.add(directory)
        _LOG.warning(
            "sparkpoint local state: ignoring %s (owner uid %d, mode %s; expected a directory "
            "of uid %d with mode 0700): roots of crashed executors are not swept",
            directory,
            st.st_uid,
            stat.filemode(st.st_mode),
            os.geteuid(),
        )
    return None


def _register(root: str) -> None:
    jvm = executor_jvm()
    if jvm is None:
        return  # no /proc: crash leftovers cannot be told from live state
    directory = _usable_owners_dir(create=True)
    if directory is None:
        return
    name = sha1(root.encode(), usedforsecurity=False).hexdigest()[:16] + ".json"
    path = os.path.join(directory, name)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"root": root, "pid": jvm[0], "start": jvm[1]}, f)
    os.replace(tmp, path)


def _read_record(directory_fd: int, name: str) -> tuple[str, int, int] | None:
    """(root, pid, start) of a record that is a regular file of this user, else None."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        owner = json.loads(os.read(fd, _MAX_RECORD))
        return str(owner["root"]), int(owner["pid"]), int(owner["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def _remove_root(root: str) -> bool:
    """Delete ``root`` if it has the form of a root and every directory from
    ``sparkpoint-state`` down is a real directory of this user; returns whether it did."""
    if not is_state_root(root):
        return False
    application_dir, executor = os.path.split(root)
    state_dir, application = os.path.split(application_dir)
    base, state = os.path.split(state_dir)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fds: list[int] = []
    try:
        fds.append(os.open(base, os.O_RDONLY | os.O_DIRECTORY))
        fds.append(os.open(state, flags, dir_fd=fds[-1]))
        if not stat.S_ISDIR(os.fstat(fds[-1]).st_mode):
            return False
        fds.append(os.open(application, flags, dir_fd=fds[-1]))
        if not _mine(os.fstat(fds[-1])):
            return False
        if not _mine(os.stat(executor, dir_fd=fds[-1], follow_symlinks=False)):
            return False
        shutil.rmtree(executor, dir_fd=fds[-1])  # fd-based: never follows a symlink
        return True
    except OSError:
        return False
    finally:
        for fd in reversed(fds):
            os.close(fd)


def sweep_dead_roots() -> list[str]:
    """Delete the local-state roots whose executor JVM no longer runs on this host;
    returns the roots deleted."""
    directory = _usable_owners_dir(create=False)
    if directory is None:
        return []
    removed = []
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in os.listdir(dir_fd):
            if not name.endswith(".json"):
                continue
            record = _read_record(dir_fd, name)
            if record is None:
                continue
            root, pid, start = record
            if process_alive(pid, start):
                continue
            if _remove_root(root):
                removed.append(root)
            elif os.path.lexists(root):
                _LOG.warning(
                    "sparkpoint local state: not removing %s named by %s/%s: not a "
                    "sparkpoint-state/<application>/<executor> directory of uid %d",
                    root,
                    directory,
                    name,
                    os.geteuid(),
                )
            try:
                os.remove(name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
    finally:
        os.close(dir_fd)
    return removed


def job_dir(application_id: str, override: str | None, job_id: str) -> str:
    """This executor's local directory of ``job_id``."""
    return os.path.join(executor_root(application_id, override), job_id)


def remove_job(application_id: str, override: str | None, job_id: str) -> bool:
    """Delete this executor's local state of ``job_id``; returns whether there was any."""
    path = job_dir(application_id, override, job_id)
    existed = os.path.isdir(path) and not os.path.islink(path)
    if existed:
        shutil.rmtree(path, ignore_errors=True)
    return existed
