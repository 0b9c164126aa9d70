"""The restore watchdog ends a Python worker whose task runs past
``sparkpoint.restart.restore-timeout`` (exit code 1, its stacks on stderr), even while the
hang holds the GIL inside C code, and leaves a task that finishes in time alone. Real
subprocesses; no Spark (the worker is what Spark would see exit as "crashed")."""

from __future__ import annotations

import os
import subprocess
import sys
import time

_RUN = (
    "import time\n"
    "from sparkpoint.runtime.task.restore_watchdog import restore_watchdog\n"
    "with restore_watchdog({timeout}):\n"
    "    {body}\n"
    "time.sleep({after})\n"
    "print('finished')\n"
)


def _run(timeout: float | None, body: str, after: float = 0.0, **env: str) -> tuple[int, str]:
    code = _RUN.format(timeout=timeout, body=body, after=after)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd(), **env},
        check=False,
    )
    assert time.monotonic() - started < 30
    return done.returncode, done.stdout + done.stderr


def test_a_hang_past_the_timeout_ends_the_worker() -> None:
    code, output = _run(0.3, "time.sleep(25)")
    assert code == 1 and "finished" not in output
    assert "Timeout (0:00:00.300000)!" in output
    assert 'File "<string>", line 4' in output  # the stack of the hang


def test_a_hang_in_c_code_holding_the_gil_ends_the_worker() -> None:
    # Catastrophic backtracking: minutes inside the regex engine, the GIL held throughout.
    code, output = _run(0.3, "import re; re.match(r'(a*)*b', 'a' * 40)")
    assert code == 1 and "finished" not in output and "Timeout (0:00:00.300000)!" in output


def test_a_task_within_the_timeout_is_left_alone_and_disarms_it() -> None:
    code, output = _run(0.3, "time.sleep(0.05)", after=0.6)
    assert (code, output.strip()) == (0, "finished")


def test_no_timeout_or_pysparks_own_traceback_dumps_arm_nothing() -> None:
    assert _run(None, "time.sleep(0.6)") == (0, "finished\n")
    assert _run(0, "time.sleep(0.6)") == (0, "finished\n")
    # PySpark's periodic dumps use the same (single) watchdog: left to them.
    code, output = _run(0.3, "time.sleep(0.6)", PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS="30")
    assert (code, output) == (0, "finished\n")
