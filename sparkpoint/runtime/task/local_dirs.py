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
``<application>`` directories in it; an existing one is used only when it is a real
directory owned by root or this user, and sticky when others may write to it (else another
user could rename this user's directories in it and put their own in their place).

Each directory on the way is opened relative to the one above it (``O_DIRECTORY |
O_NOFOLLOW``) and checked through its handle; the executor root's handle is held for the
life of the process, and job directories are created, checked and reached through it
(``/proc/self/fd/<fd>/<job>`` where the system has it), so a path swapped after the checks
cannot redirect the job's state.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
import threading
import uuid
from hashlib import sha1

from sparkpoint.private_files import read_own_json
from sparkpoint.runtime.task.executor import current_executor, executor_jvm, process_alive

__all__ = [
    "executor_root",
    "is_state_root",
    "job_dir",
    "owners_dir",
    "remove_job",
    "sweep_dead_roots",
]

_LOG = logging.getLogger("sparkpoint.task")
_STATE = "sparkpoint-state"
_OWNERS = "sparkpoint-local-state-owners"
_MAX_RECORD = 4096  # bytes: a record is one short JSON object
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_PROC_FD = os.path.isdir("/proc/self/fd")  # a path through a held directory handle
_registered: set[str] = set()
_warned: set[str] = set()
_lock = threading.Lock()
_roots: dict[str, int] = {}  # executor root path -> its held handle


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


def _refusal(path: str, st: os.stat_result, expected: str) -> PermissionError:
    kind = "symlink" if stat.S_ISLNK(st.st_mode) else "mode"
    return PermissionError(
        f"sparkpoint local state: {path} is not {expected} (owner uid {st.st_uid}, {kind} "
        f"{stat.filemode(st.st_mode)}); refusing to keep state there"
    )


def _open_dir(name: str, dir_fd: int, path: str, expected: str) -> int:
    """Open directory ``name`` in ``dir_fd`` without following a symlink; a symlink or a
    file is refused (``PermissionError`` naming ``path``)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            raise exc from None
        raise _refusal(path, st, expected) from None


def _private_dir(dir_fd: int, name: str, path: str) -> int:
    """Create directory ``name`` (mode 0700) in ``dir_fd`` or accept it if it is already a
    real directory of this user; its open handle. ``PermissionError`` naming ``path``
    otherwise."""
    try:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        pass
    expected = f"a directory owned by uid {os.geteuid()}"
    fd = _open_dir(name, dir_fd, path, expected)
    st = os.fstat(fd)
    if not _mine(st):
        os.close(fd)
        raise _refusal(path, st, expected)
    return fd


def _shared_state_dir(base_fd: int, path: str) -> int:
    """``<base>/sparkpoint-state``, open: made sticky and world-writable when this user
    creates it, so that other users sharing the base can add their own application
    directories; an existing one must be owned by root or this user, and sticky when
    group or others may write to it."""
    created = True
    try:
        os.mkdir(_STATE, 0o700, dir_fd=base_fd)
    except FileExistsError:
        created = False
    expected = (
        f"a directory owned by root or uid {os.geteuid()} that is sticky when others may "
        f"write to it (as /tmp: chmod 1777)"
    )
    fd = _open_dir(_STATE, base_fd, path, expected)
    st = os.fstat(fd)
    if created and st.st_uid == os.geteuid():
        os.fchmod(fd, 0o1777)
        return fd
    shared = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if st.st_uid not in (0, os.geteuid()) or (shared and not st.st_mode & stat.S_ISVTX):
        os.close(fd)
        refusal = _refusal(path, st, expected)
        raise PermissionError(
            f"{refusal} A base shared by several users needs it made by root "
            f"(mkdir -m 1777 {path}); else set sparkpoint.local-state.dir to a directory of "
            "this user's own"
        )
    return fd


def _alive(fd: int) -> bool:
    """Whether the directory behind a held handle still exists (not removed)."""
    try:
        return os.fstat(fd).st_nlink > 0
    except OSError:
        return False


def _through(fd: int, path: str) -> str:
    """A path that reaches the directory of the held handle ``fd`` (``path`` where the
    system has no ``/proc/self/fd``). Root handles are never closed while their directory
    exists, so the path names one directory for the life of the process."""
    return f"/proc/self/fd/{fd}" if _PROC_FD else path


def executor_root(application_id: str, override: str | None) -> str:
    """This executor's local-state root (registered on first use, see the module doc); its
    handle is held (``job_dir`` opens job directories relative to it)."""
    executor = current_executor()
    base = _base(override)
    state = os.path.join(base, _STATE)
    application = os.path.join(state, _safe(application_id))
    root = os.path.join(application, _safe(executor.executor_id))
    with _lock:
        held = _roots.get(root)
        if held is not None and _alive(held):
            return root
        os.makedirs(base, exist_ok=True)
        fds = [os.open(base, os.O_RDONLY | os.O_DIRECTORY)]
        try:
            fds.append(_shared_state_dir(fds[-1], state))
            fds.append(_private_dir(fds[-1], _safe(application_id), application))
            root_fd = _private_dir(fds[-1], _safe(executor.executor_id), root)
        finally:
            for fd in reversed(fds):
                os.close(fd)
        if held is not None:
            os.close(held)
        _roots[root] = root_fd
    if root not in _registered:
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
    owner = read_own_json(directory_fd, name, _MAX_RECORD)
    try:
        return str(owner["root"]), int(owner["pid"]), int(owner["start"])
    except (KeyError, TypeError, ValueError):
        return None


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


def job_dir(application_id: str, override: str | None, job_id: str, create: bool = True) -> str:
    """This executor's local directory of ``job_id``, created (mode 0700; not with
    ``create`` false) and checked relative to the executor root's held handle; the path
    returned goes through that handle, so no path swapped later redirects it (and it names
    the job, so it is never the path of another job's directory)."""
    root = executor_root(application_id, override)
    name = _safe(job_id)
    with _lock:
        root_fd = _roots[root]
        if create:
            os.close(_private_dir(root_fd, name, os.path.join(root, name)))
        return os.path.join(_through(root_fd, root), name)


def remove_job(application_id: str, override: str | None, job_id: str) -> bool:
    """Delete this executor's local state of ``job_id``; returns whether there was any."""
    root = executor_root(application_id, override)
    name = _safe(job_id)
    with _lock:
        root_fd = _roots[root]
        try:
            st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not _mine(st):
            return False
        shutil.rmtree(name, dir_fd=root_fd, ignore_errors=True)  # fd-based: no symlinks
        return True
