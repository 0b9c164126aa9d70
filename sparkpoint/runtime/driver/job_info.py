"""The driver tells ``sparkpoint run -d`` which job it started: the first job a driver process
starts is written, as one JSON object, to the file named by ``SPARKPOINT_JOB_INFO_FILE``
(set by ``sparkpoint run``; nothing is written without it)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading

from sparkpoint.config.client import JOB_INFO_FILE_ENV

__all__ = ["report_started_job"]

_LOG = logging.getLogger("sparkpoint.job")
_LOCK = threading.Lock()


def report_started_job(job_id: str, job_name: str, dashboard_url: str | None) -> None:
    """Write the job's id, name, dashboard URL, Spark application id and the driver's pid to
    ``$SPARKPOINT_JOB_INFO_FILE``, unless the file exists already (a later job of the same
    driver keeps the first one's). The file appears whole (written aside, then renamed)."""
    path = os.environ.get(JOB_INFO_FILE_ENV)
    if not path:
        return
    record = {
        "job_id": job_id,
        "job_name": job_name,
        "dashboard_url": dashboard_url,
        "spark_application_id": _spark_application_id(),
        "driver_pid": os.getpid(),
    }
    with _LOCK:
        if os.path.exists(path):
            return
        directory = os.path.dirname(os.path.abspath(path))
        try:
            fd, tmp = tempfile.mkstemp(prefix=".job-info-", dir=directory)
            with os.fdopen(fd, "w") as f:
                json.dump(record, f)
            os.replace(tmp, path)
        except OSError as exc:
            _LOG.warning(
                "Could not write the job's info to %s (%s): %s", path, JOB_INFO_FILE_ENV, exc
            )


def _spark_application_id() -> str | None:
    """The application id of this thread's active Spark session (None without one)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return None if active is None else str(active.sparkContext.applicationId)
