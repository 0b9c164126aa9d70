"""Suite-wide pytest configuration: plugins, markers and the storage-location parametrisation.

Markers follow from what a test uses, so ``pytest -m "not spark"`` runs the pure-Python
suite: a test that requests the ``spark`` fixture (directly or through ``env``) or is marked
``cluster``, or that requests a Kafka broker (``kafka_broker``, ``kafka_cluster``,
``secured_kafka_broker``: a JVM too) is marked ``spark``; one that requests ``s3_server``
is marked ``s3``. Tests that start Spark in a subprocess carry the marker themselves.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest

from tests.fixtures.system import cache_dir

# Compiled bytecode: where PYTHONDONTWRITEBYTECODE is set (as on the machines CI runs on),
# every run compiled sparkpoint and the test modules from source, and so did every
# subprocess and Spark Python worker: collection took 11 s instead of 3 s, and a subprocess
# importing sparkpoint 0.5-0.9 s more. The suite keeps bytecode out of the source tree
# as that setting asks, in the suite's cache (PYTHONPYCACHEPREFIX, inherited by
# subprocesses); SPARKPOINT_TEST_BYTECODE=off compiles from source as before.
if (
    sys.dont_write_bytecode
    and sys.pycache_prefix is None
    and os.environ.get("SPARKPOINT_TEST_BYTECODE") != "off"
):
    sys.pycache_prefix = str(cache_dir() / "pycache")
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

pytest_plugins = ["tests.fixtures.s3", "tests.fixtures.recording_fs", "tests.fixtures.postgres"]

# Tests' temporary files go to memory (tmpfs) when the machine has room for them: the suite
# writes many small files (RocksDB databases, checkpoints, local commits), and on a VM disk
# under I/O pressure ``pytest -m "not spark"`` took 45-80 s instead of 45-51 s. Set
# SPARKPOINT_TEST_TMP=disk (or pass --basetemp) to keep them on disk.
_RAM_DIR = "/dev/shm"
_RAM_NEEDED = 8 << 30
_RAM_PREFIX = "sparkpoint-pytest-"
_ram_base: str | None = None

# The JVMs the suite starts (Spark drivers, executors, standalone daemons) take their options
# from tests/spark-conf/ (see spark-defaults.conf there); subprocesses inherit these variables.
_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_CONF_DIR", os.path.join(os.path.dirname(__file__), "spark-conf"))
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", _JVM_OPTS)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pytest_configure(config: pytest.Config) -> None:
    """Put the session's base temporary directory in memory (see above), after removing
    what sessions that crashed left there."""
    global _ram_base
    if config.option.basetemp or os.environ.get("SPARKPOINT_TEST_TMP") == "disk":
        return
    try:
        if shutil.disk_usage(_RAM_DIR).free < _RAM_NEEDED:
            return
        for name in os.listdir(_RAM_DIR):
            owner = name[len(_RAM_PREFIX) :].split("-", 1)[0]
            if name.startswith(_RAM_PREFIX) and owner.isdigit() and not _alive(int(owner)):
                shutil.rmtree(os.path.join(_RAM_DIR, name), ignore_errors=True)
        _ram_base = tempfile.mkdtemp(prefix=f"{_RAM_PREFIX}{os.getpid()}-", dir=_RAM_DIR)
    except OSError:  # no tmpfs here
        return
    config.option.basetemp = os.path.join(_ram_base, "tmp")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _ram_base is not None:
        shutil.rmtree(_ram_base, ignore_errors=True)


# Fixtures that start a Kafka broker JVM: their tests are kept out of ``-m "not spark"``.
_BROKERS = {"kafka_broker", "kafka_cluster", "secured_kafka_broker"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Add the ``spark`` and ``s3`` markers by fixture use (see the module docstring)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if (
            "spark" in fixtures
            or fixtures & _BROKERS
            or item.get_closest_marker("cluster") is not None
        ):
            item.add_marker(pytest.mark.spark)
        if "s3_server" in fixtures:
            item.add_marker(pytest.mark.s3)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def storage_base(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A fresh, empty base URI: a ``file://`` temp dir, or a unique prefix on moto S3."""
    if request.param == "local":
        return tmp_path.as_uri()
    from tests.fixtures.s3 import ensure_s3_configured

    server = request.getfixturevalue("s3_server")
    ensure_s3_configured(server)
    return server.unique_prefix()


@pytest.fixture(autouse=True)
def _restore_process_trust() -> Iterator[None]:
    """A CLI command applies its trust options to the whole process (``trust_options``):
    put the process's settings back after each test, so no later test reads with them."""
    from sparkpoint.checkpoint.trust import SnapshotTrust, use_by_default
    from sparkpoint.state.pickling import pickle_allowed, set_allow_pickle

    allowed = pickle_allowed()
    yield
    use_by_default(SnapshotTrust())
    set_allow_pickle(allowed)
