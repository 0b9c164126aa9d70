"""Two users run keyed jobs on one host at the same time (issue 29), sharing ``TMPDIR`` and
the local-state base, with records planted by the other user: both are exact, nothing
outside their own state is deleted. Runs as root: the second user is ``nobody``."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.multiuser_job import expected

pytestmark = [
    pytest.mark.spark,  # each job runs its own driver process and Spark
    pytest.mark.skipif(
        os.geteuid() != 0, reason="needs root: runs the second job as user nobody (runuser)"
    ),
]

SCRIPT = Path(__file__).with_name("multiuser_job.py")
REPO = SCRIPT.parent.parent.parent


@pytest.fixture
def interpreter_for_nobody() -> Iterator[None]:
    """Lets ``nobody`` reach this interpreter: its directories must be searchable (``x``) for
    others; the mode of each directory on the way that was not is restored afterwards."""
    changed = []
    for d in [*Path(os.path.realpath(sys.executable)).parents, REPO, *REPO.parents]:
        mode = d.stat().st_mode
        if not mode & stat.S_IXOTH:
            d.chmod(mode | stat.S_IXOTH)
            changed.append((d, mode))
    try:
        yield
    finally:
        for d, mode in changed:
            d.chmod(stat.S_IMODE(mode))


def _run(user: str | None, home: Path, tmp: Path, base: Path) -> subprocess.Popen[bytes]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(REPO),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # the suite's JVM options (tests/conftest.py) and the Java to run
        **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "SPARK_CONF_DIR")},
    }
    runas = ["runuser", "-u", user, "--"] if user else []
    argv = [*runas, "env", "-i", *(f"{k}={v}" for k, v in env.items())]
    return subprocess.Popen(
        [*argv, sys.executable, str(SCRIPT), str(base)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _result(proc: subprocess.Popen[bytes]) -> list[list[int]]:
    out, _ = proc.communicate(timeout=400)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-3000:]
    line = next(ln for ln in text.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]


def test_two_users_run_keyed_jobs_side_by_side(interpreter_for_nobody: None) -> None:
    shared = Path(tempfile.mkdtemp(prefix="sparkpoint-two-users-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        tmp, base = shared / "tmp", shared / "local-state"  # both shared by the two users
        tmp.mkdir(mode=0o1777)
        tmp.chmod(0o1777)
        # a base shared by users: its sparkpoint-state made by root, sticky (as /tmp)
        (base / "sparkpoint-state").mkdir(parents=True)
        for directory in (base, base / "sparkpoint-state"):
            directory.chmod(0o1777)
        subprocess.run(["runuser", "-u", "nobody", "--", "mkdir", str(shared / "home")])
        # nobody plants records naming a victim of root's: in the old shared owner directory
        # and in a pre-created owner directory under root's name
        victim = shared / "victim"
        victim.mkdir()
        (victim / "precious.txt").write_text("keep me")
        for name in ["sparkpoint-local-state-owners", "sparkpoint-local-state-owners-0"]:
            record = json.dumps({"root": str(victim), "pid": 1, "start": 0})
            script = f"mkdir -m 700 {tmp / name} && printf '%s' '{record}' > {tmp / name}/x.json"
            subprocess.run(["runuser", "-u", "nobody", "--", "sh", "-c", script], check=True)
        jobs = [
            _run(None, shared, tmp, base),
            _run("nobody", shared / "home", tmp, base),
        ]
        results = [_result(p) for p in jobs]
        assert results == [expected(), expected()]
        assert (victim / "precious.txt").read_text() == "keep me"
        assert (tmp / "sparkpoint-local-state-owners" / "x.json").exists()
        owners = tmp / "sparkpoint-local-state-owners-65534"
        assert owners.stat().st_uid == 65534 and owners.stat().st_mode & 0o777 == 0o700
        state = base / "sparkpoint-state"
        owners_of_apps = {p.stat().st_uid for p in state.iterdir()}
        assert owners_of_apps == {0, 65534}  # one application directory per user
    finally:
        shutil.rmtree(shared, ignore_errors=True)
