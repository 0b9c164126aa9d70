"""The SparkSession sparkpoint runs on: an existing one, a master URL, or local mode."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["DEFAULT_CONF", "SUBMITTED_CONF", "get_spark_session", "prepare_environment"]

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

# What a session sparkpoint creates in a driver that spark-submit launched (``sparkpoint
# run`` or by hand) gets where the submission left it unset: the submission's master,
# driver address, UI and parallelism stand. Speculation stays off: a speculative copy of a
# keyed task would run an epoch against the same state twice.
SUBMITTED_CONF = {
    "spark.python.worker.reuse": "true",
    "spark.locality.wait.process": DEFAULT_CONF["spark.locality.wait.process"],
    "spark.speculation": "false",
}


def prepare_environment() -> None:
    """Make Python workers use this interpreter and bind Spark to loopback by default."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def get_spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> Any:
    """The active SparkSession, or a new one: on ``master``, else on the master spark-submit
    was given, else ``local[*,4]`` (all cores, 4 task attempts)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    if master is None and _launched_by_spark_submit():
        builder = SparkSession.builder
        for key, value in {**_unset(SUBMITTED_CONF), **(conf or {})}.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    prepare_environment()
    builder = SparkSession.builder.master(master or "local[*,4]").appName("sparkpoint")
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _launched_by_spark_submit() -> bool:
    """Whether this Python is a driver spark-submit started (its JVM is up, its
    configuration set): PySpark's launcher hands such a driver the gateway's port."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def _unset(defaults: dict[str, str]) -> dict[str, str]:
    """The entries of ``defaults`` the submission's configuration does not set."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM: its conf is there
    submitted = SparkConf()
    return {k: v for k, v in defaults.items() if not submitted.contains(k)}
