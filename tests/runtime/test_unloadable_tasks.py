"""A job whose tasks the Python workers cannot load fails at once, with what to do, instead
of restarting without end (real Spark: the modules exist on the driver only)."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from sparkpoint.common import RestartStrategies
from sparkpoint.connectors.sink import CollectSink
from sparkpoint.datastream import FileSystemCheckpointStorage
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
from sparkpoint.errors import JobExecutionError

_RESTARTS = 3


def _run(env: Any, tmp_path: Any, fn: Any) -> JobExecutionError:
    """Run numbers -> map(fn) -> sink with checkpoints and up to ``_RESTARTS`` restarts;
    returns the job's error."""
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(_RESTARTS, 0))
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
        started = time.monotonic()
        error = _run(env, tmp_path, fns.double)
        seconds = time.monotonic() - started
    finally:
        sys.modules.pop("sparkpoint_driver_only_fns", None)
    text = str(error)
    assert "cannot run" in text
    assert "ModuleNotFoundError: No module named 'sparkpoint_driver_only_fns'" in text
    assert "spark.archives" in text and "addPyFile" in text
    assert "restarts:" not in text  # the restart strategy was never asked
    assert "read_command" in str(error.__cause__)  # Spark's own error is kept as the cause
    assert seconds < 60


def test_a_function_missing_from_the_executors_module_fails_the_job_without_restarts(
    env: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    import tests.runtime.jobs as jobs

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
    text = str(_run(env, tmp_path, _imports_a_missing_module))
    assert f"failed after {_RESTARTS} restarts" in text
    assert "ModuleNotFoundError: No module named 'sparkpoint_module_nowhere'" in text
    assert "cannot run" not in text
