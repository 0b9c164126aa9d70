"""The SparkSession sparkpoint runs on: an existing one, a master URL, or local mode."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["DEFAULT_CONF", "get_spark_session", "prepare_environment"]

# Settings of the sessions sparkpoint creates (a session the user created is used as it is;
# docs/architecture.md says which of these help there too).
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
    "spark.driver.host": "127.0.0.1",
    "spark.default.parallelism": "2",
    # A keyed subtask prefers the executor holding its state: let it wait for that executor
    # while the executor is busy with another subtask (3 s by default) rather than run
    # elsewhere and restore. A lost executor does not make it wait: the job master sees the
    # loss, cancels the run and places the subtask anew.
    "spark.locality.wait.process": "10s",
}


def prepare_environment() -> None:
    """Make Python workers use this interpreter and bind Spark to loopback by default."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def get_spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> Any:
    """The active SparkSession, or a new one (``local[*,4]``: all cores, 4 task attempts)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    prepare_environment()
    builder = SparkSession.builder.master(master or "local[*,4]").appName("sparkpoint")
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
