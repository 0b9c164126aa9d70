"""The SparkSession sparkpoint runs on: an existing one, a master URL, or local mode."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["get_spark_session", "prepare_environment"]

# Spark settings epochs rely on: partitions must stay where ``repartitionById`` put them.
REQUIRED_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
}
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.host": "127.0.0.1",
    "spark.default.parallelism": "2",
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
        _apply_required(active)
        return active
    prepare_environment()
    builder = SparkSession.builder.master(master or "local[*,4]").appName("sparkpoint")
    for key, value in {**DEFAULT_CONF, **(conf or {}), **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _apply_required(spark)
    return spark


def _apply_required(spark: Any) -> None:
    for key, value in REQUIRED_CONF.items():
        spark.conf.set(key, value)
