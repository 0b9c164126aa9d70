"""How the job master reads a failed epoch: the error line to report, and failures that no
restart can fix (Flink's ``ThrowableClassifier`` and its non-recoverable errors).

A Python worker that cannot run the task Spark sent it fails before any user code runs,
the same way on every attempt: its Python is another minor version than the driver's
(PySpark's ``PYTHON_VERSION_MISMATCH``), or it cannot unpickle the task (PySpark's
``read_command``) because a module the job's functions live in, or sparkpoint itself, is
missing from the executor's Python or is another version there. Restarting from a
checkpoint runs the same task again, so the job fails at once with what to do, whatever
its restart strategy allows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sparkpoint.errors import (
    KafkaAccessError,
    MetadataFormatError,
    RecordsDeletedError,
    RestoreError,
)

__all__ = [
    "access_denied",
    "records_deleted",
    "restore_failure",
    "short_error",
    "unloadable_task",
    "worker_crash",
]

_ERROR_LINE = re.compile(r"^([\w.]+(?:Error|Exception|Failure|Exit)\b.*)$", re.MULTILINE)
_JVM_PREFIXES = ("org.", "java.", "scala.", "py4j.")
_PYSPARK = re.compile(r"^pyspark\.[\w.]*\.(?=\w+:)")
# PySpark's worker unpickles the task's function (with every user function in it) here.
_LOADING_THE_TASK = "in read_command"
_LOAD_ERRORS = ("ModuleNotFoundError", "ImportError", "AttributeError")
_VERSION_MISMATCH = "[PYTHON_VERSION_MISMATCH]"
_RESTORE_FAILURE = re.compile(r"\bSubtaskRestoreError: (.+)$", re.MULTILINE)
# Spark's message when a Python worker dies mid-task (a crash, a kill, or the restore
# watchdog of runtime/task/restore_watchdog.py ending a worker that took too long).
_WORKER_CRASHED = "Python worker exited unexpectedly (crashed)"
_RECORDS_DELETED = re.compile(r"\bRecordsDeletedError: (.+)$", re.MULTILINE)
_ACCESS_DENIED = re.compile(r"\bKafkaAccessError: (.+)$", re.MULTILINE)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (causes, else contexts), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _carried(
    exc: BaseException, types: tuple[type[BaseException], ...], in_text: re.Pattern[str]
) -> str | None:
    """The message of the first exception of ``types`` in ``exc``'s chain, or the last one
    ``in_text`` finds in a chain member's text (a task's error carried by Spark)."""
    for current in _chain(exc):
        if isinstance(current, types):
            return str(current)
        found = in_text.findall(str(current))
        if found:
            return str(found[-1])[:1000]
    return None


def short_error(exc: BaseException) -> str:
    """The innermost Python exception line of a (Spark-wrapped) failure: the user's or
    Python's error if there is one, else PySpark's own (without its module path)."""
    text = str(exc)
    found = [m for m in _ERROR_LINE.findall(text) if not m.startswith(_JVM_PREFIXES)]
    chosen = [m for m in found if not m.startswith("pyspark.")] or found
    if chosen:
        return _PYSPARK.sub("", chosen[-1])[:500]
    return text.splitlines()[0][:500] if text else type(exc).__name__


def unloadable_task(exc: BaseException) -> str | None:
    """What to tell the user when ``exc`` (or an exception it was raised from) is a Python
    worker failing to load its task; None for every other failure."""
    for current in _chain(exc):
        text = str(current)
        if _VERSION_MISMATCH in text:
            line = short_error(current).rstrip(".")
            return (
                f"the executors' Python is another minor version than the driver's ({line}). "
                "Point spark.pyspark.python (PYSPARK_PYTHON) at the driver's Python version "
                "on every executor. A restart runs the same tasks, so the job does not restart"
            )
        if _LOADING_THE_TASK in text:
            line = short_error(current)
            if line.startswith(_LOAD_ERRORS):
                return (
                    f"a Python worker could not load the job's tasks ({line}). Every "
                    "executor's Python must import sparkpoint and the modules that define "
                    "the job's functions, in the driver's versions: install them there "
                    "(spark.pyspark.python, or a packed environment in spark.archives) or "
                    "ship them with spark.submit.pyFiles or SparkContext.addPyFile. A "
                    "restart runs the same tasks, so the job does not restart"
                )
    return None


def records_deleted(exc: BaseException) -> str | None:
    """The message of a ``RecordsDeletedError`` in ``exc`` or its causes (the driver's, or a
    task's carried in Spark's error text): records a source had to read are gone, which no
    restart fixes; None if there is none."""
    return _carried(exc, (RecordsDeletedError,), _RECORDS_DELETED)


def restore_failure(exc: BaseException) -> str | None:
    """The message of a restore failure in ``exc`` or its causes: a subtask's
    (``SubtaskRestoreError``, raised in a task and carried in Spark's error text) or the
    driver's (``RestoreError``, or a snapshot refused as malformed or unsafe); None if none."""
    return _carried(exc, (RestoreError, MetadataFormatError), _RESTORE_FAILURE)


def worker_crash(exc: BaseException) -> str | None:
    """What to report when ``exc`` (or an exception it was raised from) is a Python worker
    that died while running a task (Spark's "Python worker exited unexpectedly (crashed)");
    None for every other failure."""
    for current in _chain(exc):
        if _WORKER_CRASHED in str(current):
            return (
                f"{_WORKER_CRASHED}: a Python worker died (a crash, a kill, or "
                "sparkpoint.restart.restore-timeout) while running the first epoch after "
                "the restore"
            )
    return None


def access_denied(exc: BaseException) -> str | None:
    """The message of a ``KafkaAccessError`` in ``exc`` or its causes (the driver's, or a
    task's carried in Spark's error text): a missing ACL or refused credentials, which no
    restart can fix; None if none."""
    return _carried(exc, (KafkaAccessError,), _ACCESS_DENIED)
