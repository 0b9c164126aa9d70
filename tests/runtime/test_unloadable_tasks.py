"""A job whose tasks the Python workers cannot load fails at once, with what to do, instead
of restarting without end (real Spark: modules that exist on the driver only, executors
running another Python version)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from sparkpoint.common import RestartStrategies
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import FileSystemCheckpointStorage
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
from sparkpoint.errors import JobExecutionError

_RESTARTS = 3


def _run(env: Any, tmp_path: Any, fn: Any, restarts: int = _RESTARTS) -> JobExecutionError:
    """Run numbers -> map(fn) -> sink with checkpoints and up to ``restarts`` restarts;
    returns the job's error."""
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, 0))
    env.from_source(NumberSequenceSource(0, 99), None, "numbers").map(fn).sink_to(CollectSink())
    with pytest.raises(JobExecutionError) as info:
        env.execute("unloadable")
    return info.value


def test_a_module_only_the_driver_has_fails_the_job_without_restarts(
    env: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    here = tmp_path / "driver_only"
    here.mkdir()
    (here / "sparkpoint_driver_only_fns.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(here))
    import sparkpoint_driver_only_fns as fns

    try:
        error = _run(env, tmp_path, fns.double)
    finally:
        sys.modules.pop("sparkpoint_driver_only_fns", None)
    text = str(error)
    assert "cannot run" in text
    assert "ModuleNotFoundError: No module named 'sparkpoint_driver_only_fns'" in text
    assert "spark.archives" in text and "addPyFile" in text
    assert "restarts:" not in text  # the restart strategy was never asked
    assert "read_command" in str(error.__cause__)  # Spark's own error is kept as the cause


def test_a_function_missing_from_the_executors_module_fails_the_job_without_restarts(
    env: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    import tests.runtime.jobs.reference as jobs

    def added_on_the_driver(x: int) -> int:
        return x

    # The driver's copy of a module the workers import gains a function theirs lacks (an
    # executor with an older version of the user's code): pickled by reference, not found.
    added_on_the_driver.__qualname__ = "added_on_the_driver"
    added_on_the_driver.__module__ = jobs.__name__
    monkeypatch.setattr(jobs, "added_on_the_driver", added_on_the_driver, raising=False)
    text = str(_run(env, tmp_path, added_on_the_driver))
    assert "cannot run" in text
    assert "AttributeError: Can't get attribute 'added_on_the_driver'" in text
    assert "restarts:" not in text


def _imports_a_missing_module(x: int) -> int:
    import sparkpoint_module_nowhere  # type: ignore[import-not-found]  # noqa: F401

    return x


def test_an_import_error_in_user_code_goes_through_the_restart_strategy(
    env: Any, tmp_path: Any
) -> None:
    # One restart shows the strategy applies (each run costs Spark's four task attempts,
    # each in a fresh Python worker).
    text = str(_run(env, tmp_path, _imports_a_missing_module, restarts=1))
    assert "failed after 1 restarts" in text
    assert "ModuleNotFoundError: No module named 'sparkpoint_module_nowhere'" in text
    assert "cannot run" not in text


def _python_of_another_minor_version() -> str | None:
    """An installed Python 3.9+ whose minor version differs from this one's, if any."""
    ours = "{}.{}".format(*sys.version_info[:2])
    candidates = [shutil.which(f"python3.{minor}") for minor in range(9, 16)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))
    for exe in filter(None, candidates):
        try:
            version = subprocess.run(
                [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue  # e.g. a pyenv shim of a version that is not selected
        if version != ours and tuple(map(int, version.split("."))) >= (3, 9):
            return exe
    return None


_VERSION_DRIVER = """
import sys
from sparkpoint.common import RestartStrategies
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import FileSystemCheckpointStorage, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
from sparkpoint.errors import JobExecutionError
from sparkpoint.runtime.spark.session import get_spark_session

env = StreamExecutionEnvironment.get_execution_environment(spark=get_spark_session("local[1]"))
env.enable_checkpointing(100)
env.get_checkpoint_config().set_checkpoint_storage(FileSystemCheckpointStorage(sys.argv[1]))
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
env.from_source(NumberSequenceSource(0, 9), None, "n").map(lambda x: x).sink_to(CollectSink())
try:
    env.execute("other-python")
except JobExecutionError as e:
    print("JOB ERROR:", e)
"""


@pytest.mark.spark  # a driver of its own: the executors' Python is fixed per SparkContext
def test_executors_on_another_python_version_fail_the_job_without_restarts(
    tmp_path: Any,
) -> None:
    other = _python_of_another_minor_version()
    if other is None:
        pytest.skip("no Python 3.9+ of another minor version is installed")
    env = dict(os.environ, PYSPARK_PYTHON=other, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(
        [sys.executable, "-c", _VERSION_DRIVER, (tmp_path / "ckpt").as_uri()],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("JOB ERROR:")), "")
    assert "cannot run: the executors' Python is another minor version" in line, (
        done.stdout[-2000:] + done.stderr[-3000:]
    )
    assert "[PYTHON_VERSION_MISMATCH]" in line and "spark.pyspark.python" in line
    assert "restarts:" not in line
