"""One local SparkSession for all runtime tests (Spark's start-up costs seconds)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """``local[2,4]``: two cores, four attempts per task (so Spark retries tasks)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must import the test modules that define user functions.
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    extra = [here, root, os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in extra if p)
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.fixtures.system import postgresql_jdbc_jar, spark_kafka_jars

    # PostgreSQL's JDBC driver for test_spark_writer.py and Spark's Kafka connector for
    # `spark.readStream.format("kafka")` (fetched once into a cache): local jars on the
    # classpath cost no start-up time. A jar that cannot be fetched is left out, and the test
    # that needs it fails (the PostgreSQL fixture with what to install).
    jars = []
    for fetch in (lambda: [postgresql_jdbc_jar()], spark_kafka_jars):
        try:
            jars += [str(j) for j in fetch()]
        except pytest.fail.Exception:
            pass
    conf = {"spark.jars": ",".join(jars)} if jars else {}
    # Spark's event log, read by test_observing.py (every epoch's jobs are described).
    event_log = tempfile.mkdtemp(prefix="sparkpoint-eventlog-")
    conf.update(
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": event_log,
            "spark.eventLog.compress": "false",
        }
    )
    session = get_spark_session("local[2,4]", conf)
    yield session
    session.stop()
    shutil.rmtree(event_log, ignore_errors=True)


@pytest.fixture
def env(spark: Any, tmp_path: Any) -> Any:
    """A fresh environment on the shared session, local state under ``tmp_path``."""
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import StreamExecutionEnvironment
    from tests.epoch_mode import apply_test_epoch_mode

    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", str(tmp_path / "local-state"))
    apply_test_epoch_mode(conf)
    e = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    e.set_parallelism(2)
    return e
