"""Local-state roots on a shared host (issue 29): owner records are this user's own, and only
real ``<base>/sparkpoint-state/<application>/<executor>`` directories of this user are ever
removed. The tests marked root plant records and directories as user ``nobody``."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.runtime.task import local_dirs
from sparkpoint.runtime.task.executor import process_start_time
from sparkpoint.runtime.task.local_dirs import (
    executor_root,
    is_state_root,
    owners_dir,
    sweep_dead_roots,
)

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: plants files as user nobody with runuser"
)


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A sticky, world-writable directory (like /tmp) that is this test's ``TMPDIR``."""
    d = Path(tempfile.mkdtemp(prefix="sparkpoint-hosts-", dir="/tmp"))
    d.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    monkeypatch.setattr(local_dirs, "_registered", set())
    monkeypatch.setattr(local_dirs, "_warned", set())
    monkeypatch.setattr(local_dirs, "_roots", {})
    monkeypatch.setattr(local_dirs, "_jobs", {})
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _as_nobody(*argv: str) -> None:
    subprocess.run(["runuser", "-u", "nobody", "--", *argv], check=True)


def _victim(d: Path, name: str = "victim") -> Path:
    victim = d / name
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    return victim


def _record(directory: Path, root: str, name: str = "0123456789abcdef.json") -> Path:
    """A record that names ``root`` with an executor JVM that is not running."""
    path = directory / name
    path.write_text(f'{{"root": "{root}", "pid": {os.getpid()}, "start": -1}}')
    return path


def _snapshot(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def test_the_form_of_a_root_is_exact() -> None:
    assert is_state_root("/b/sparkpoint-state/local-17/driver")
    assert is_state_root("/var/x/sparkpoint-state/app-1.2_3/7")
    for path in [
        "b/sparkpoint-state/app/driver",  # relative
        "/b/sparkpoint-state/app/../driver",
        "/b/sparkpoint-state/app/driver/",
        "/b/sparkpoint-state/../driver",
        "/b/sparkpoint-state/app/..",
        "/b/sparkpoint-state/./driver",
        "/b/other/app/driver",
        "/sparkpoint-state/app/driver",  # no base
        "/b/sparkpoint-state/app",
        "/b/sparkpoint-state/app/driver/job",
        "/b/sparkpoint-state/a p/driver",
        "/home/user",
        "/",
    ]:
        assert not is_state_root(path), path


def test_the_owner_directory_is_per_user_and_private(shared_tmp: Path) -> None:
    assert owners_dir() == str(shared_tmp / f"sparkpoint-local-state-owners-{os.geteuid()}")
    local_dirs._register("/b/sparkpoint-state/app/driver")  # no JVM here: nothing written
    os.makedirs(owners_dir(), mode=0o700)
    assert local_dirs._usable_owners_dir(create=False) == owners_dir()


def test_a_dead_root_is_swept(shared_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alive = (os.getpid(), process_start_time(os.getpid()))
    monkeypatch.setattr(local_dirs, "executor_jvm", lambda: alive)
    root = executor_root("app-1", str(shared_tmp / "base"))
    (Path(root) / "job" / "op").mkdir(parents=True)
    assert sweep_dead_roots() == []  # its JVM runs
    record = Path(owners_dir()) / os.listdir(owners_dir())[0]
    record.write_text(record.read_text().replace(f'"start": {alive[1]}', '"start": -1'))
    assert Path(owners_dir()).stat().st_mode & 0o777 == 0o700
    assert (shared_tmp / "base" / "sparkpoint-state").stat().st_mode & 0o7777 == 0o1777
    assert sweep_dead_roots() == [root]
    assert not os.path.exists(root) and os.listdir(owners_dir()) == []


def test_a_record_naming_another_directory_deletes_nothing(shared_tmp: Path) -> None:
    victim = _victim(shared_tmp)
    owners = Path(owners_dir())
    owners.mkdir(mode=0o700)
    _record(owners, str(victim), "a.json")
    _record(owners, str(victim / ".." / "victim"), "b.json")
    base = shared_tmp / "base" / "sparkpoint-state"
    (base / "app").mkdir(parents=True)
    (base / "app" / "1").symlink_to(victim)  # the exact form, but a symlink
    _record(owners, str(base / "app" / "1"), "c.json")
    (shared_tmp / "b2").mkdir()
    (shared_tmp / "b2" / "sparkpoint-state").symlink_to(base)  # a symlink on the way
    _record(owners, str(shared_tmp / "b2" / "sparkpoint-state" / "app" / "1"), "d.json")
    before = _snapshot(shared_tmp)
    assert sweep_dead_roots() == []
    assert _snapshot(shared_tmp) == before - {
        f"sparkpoint-local-state-owners-{os.geteuid()}/{n}.json" for n in "abcd"
    }
    assert (victim / "precious.txt").read_text() == "keep me"


def test_an_owner_directory_others_can_write_is_ignored(
    shared_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    victim = _victim(shared_tmp, "sparkpoint-state-victim")
    root = shared_tmp / "base" / "sparkpoint-state" / "app" / "1"
    root.mkdir(parents=True)
    owners = Path(owners_dir())
    owners.mkdir()
    owners.chmod(0o777)
    _record(owners, str(root))
    with caplog.at_level(logging.WARNING, "sparkpoint.task"):
        assert sweep_dead_roots() == []
    assert root.is_dir() and victim.is_dir()
    assert "expected a directory of uid" in caplog.text


def test_a_symlinked_application_directory_is_refused(shared_tmp: Path) -> None:
    victim = _victim(shared_tmp)
    state = shared_tmp / "base" / "sparkpoint-state"
    state.mkdir(parents=True)
    (state / "app").symlink_to(victim)
    with pytest.raises(PermissionError, match="not a directory owned by uid"):
        executor_root("app", str(shared_tmp / "base"))
    assert _snapshot(victim) == {"precious.txt"}


@needs_root
def test_records_planted_by_another_user_delete_nothing(shared_tmp: Path) -> None:
    """``nobody`` plants records in the old shared directory, in a pre-created owner
    directory of root's, and a root-shaped directory of its own: none is deleted."""
    victim = _victim(shared_tmp)
    own = shared_tmp / "nobody-base"
    planted_root = own / "sparkpoint-state" / "app" / "1"
    _as_nobody("mkdir", "-p", str(planted_root))
    for directory in ["sparkpoint-local-state-owners", Path(owners_dir()).name]:
        _as_nobody("mkdir", "-m", "700", str(shared_tmp / directory))
        for i, target in enumerate([victim, planted_root]):
            path = shared_tmp / directory / f"{i}.json"
            text = f'{{"root": "{target}", "pid": {os.getpid()}, "start": -1}}'
            _as_nobody("sh", "-c", f"printf '%s' '{text}' > {path}")
    before = _snapshot(shared_tmp)
    assert sweep_dead_roots() == []
    # root's own job starts on this host: it neither uses nor trusts nobody's directories
    root = executor_root("app-2", str(shared_tmp / "root-base"))
    assert os.path.isdir(root)
    assert sweep_dead_roots() == []
    assert before <= _snapshot(shared_tmp)
    assert (victim / "precious.txt").read_text() == "keep me"
    assert planted_root.is_dir()


@needs_root
def test_an_application_directory_of_another_user_is_refused(shared_tmp: Path) -> None:
    state = shared_tmp / "base" / "sparkpoint-state"
    state.mkdir(parents=True)
    state.chmod(0o1777)
    _as_nobody("mkdir", "-m", "777", str(state / "app-3"))
    with pytest.raises(PermissionError, match="owner uid 65534"):
        executor_root("app-3", str(shared_tmp / "base"))


NOBODY = 65534


def _fork_as_nobody(action: Any) -> int:
    """Run ``action()`` in a forked child as user ``nobody``; its exit status: 0 when it
    returned, 13 when it raised ``PermissionError``, 1 on any other error."""
    pid = os.fork()
    if pid == 0:  # the child: only os calls, then _exit
        code = 1
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            action()
            code = 0
        except PermissionError:
            code = 13
        finally:
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@needs_root
@pytest.mark.parametrize(
    ("owner", "mode", "refusal"),
    [
        (NOBODY, 0o777, "owner uid 65534, mode drwxrwxrwx"),  # another user's, not sticky
        (NOBODY, 0o1777, "owner uid 65534, mode drwxrwxrwt"),  # another user's, sticky
        (0, 0o777, "owner uid 0, mode drwxrwxrwx"),  # root's but not sticky
    ],
)
def test_a_state_directory_others_can_swap_entries_of_is_refused(
    shared_tmp: Path, owner: int, mode: int, refusal: str
) -> None:
    """Issue 39's finding: ``nobody`` made ``sparkpoint-state`` first (or it is not sticky),
    so it could rename root's 0700 application directory away and put its own in its place,
    and root's next job directory landed in it. Such a directory is refused up front."""
    base = shared_tmp / "base"
    base.mkdir(mode=0o777)
    base.chmod(0o1777)
    state = base / "sparkpoint-state"
    if owner == NOBODY:
        assert _fork_as_nobody(lambda: (os.mkdir(state), os.chmod(state, mode))) == 0
    else:
        state.mkdir()
        state.chmod(mode)
    with pytest.raises(PermissionError, match=re.escape(refusal)) as refused:
        executor_root("app-4", str(base))
    assert "sticky when others may write to it (as /tmp: chmod 1777)" in str(refused.value)
    assert os.listdir(state) == []  # root made nothing in it


@needs_root
def test_roots_application_directory_cannot_be_swapped_by_nobody(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the shared directory root created (sticky), ``nobody`` cannot rename root's
    application directory, and root's job directories stay in root's own."""
    monkeypatch.setattr(local_dirs, "_roots", {})
    monkeypatch.setattr(local_dirs, "_jobs", {})
    base = shared_tmp / "base"
    base.mkdir()
    base.chmod(0o1777)
    root = Path(executor_root("app-5", str(base)))
    application = root.parent
    first = Path(local_dirs.job_dir("app-5", str(base), "job-1"))
    (first / "state").write_text("root's")

    def swap() -> None:
        os.rename(application, application.parent / "moved")
        os.makedirs(root, mode=0o777)

    assert _fork_as_nobody(swap) == 13  # sticky: nobody may not rename root's directory
    assert application.stat().st_uid == 0 and root.stat().st_uid == 0
    second = Path(local_dirs.job_dir("app-5", str(base), "job-2"))
    (second / "state").write_text("root's too")
    assert (root / "job-2" / "state").read_text() == "root's too"
    assert sorted(p.name for p in application.parent.iterdir()) == ["app-5"]


def test_a_job_directory_is_reached_through_its_held_handle(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path swapped after the checks (here by this user, as only the directory's owner
    can) does not redirect the job's state: it stays in the directory that was checked."""
    monkeypatch.setattr(local_dirs, "_roots", {})
    monkeypatch.setattr(local_dirs, "_jobs", {})
    base = shared_tmp / "base"
    root = Path(executor_root("app-6", str(base)))
    job = local_dirs.job_dir("app-6", str(base), "job-1")
    assert stat.S_IMODE((root / "job-1").stat().st_mode) == 0o700
    application = root.parent
    os.rename(application, application.parent / "checked")
    (root).mkdir(parents=True)  # a new directory at the old path
    Path(job, "op").mkdir()
    (Path(job) / "op" / "value").write_text("kept")
    assert (application.parent / "checked" / root.name / "job-1" / "op" / "value").exists()
    assert not (root / "job-1").exists()
    (root / "job-1").mkdir()  # removal, too, goes through the held handles
    assert local_dirs.remove_job("app-6", str(base), "job-1") is True
    assert not (application.parent / "checked" / root.name / "job-1").exists()
    assert (root / "job-1").is_dir()


def test_a_symlinked_job_directory_is_refused(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_dirs, "_roots", {})
    monkeypatch.setattr(local_dirs, "_jobs", {})
    victim = _victim(shared_tmp)
    root = Path(executor_root("app-7", str(shared_tmp / "base")))
    (root / "job-1").symlink_to(victim)
    with pytest.raises(PermissionError, match=r"job-1 is not a directory owned by uid .*symlink"):
        local_dirs.job_dir("app-7", str(shared_tmp / "base"), "job-1")
    assert local_dirs.remove_job("app-7", str(shared_tmp / "base"), "job-1") is False
    assert _snapshot(victim) == {"precious.txt"}
