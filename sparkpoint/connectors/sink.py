"""Two-phase-commit sinks: tasks stage each epoch's output, the driver commits on checkpoint.

A sink's ``create_writer`` runs in the task and returns committables (small, picklable
descriptions of staged output). The driver holds them per epoch and calls ``commit`` once
the checkpoint covering that epoch completes, or ``abort`` when a restore discards them.
Commits are idempotent, so a driver that dies between checkpoint and commit can redo them.
"""

from __future__ import annotations

import abc
import base64
import pickle
import sys
from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.connectors import java_format
from sparkpoint.state.type_conversion import batch_converter, convert_value
from sparkpoint.types import Row, RowKind

__all__ = [
    "CollectSink",
    "PrintSink",
    "Sink",
    "SinkWriter",
    "format_value",
    "format_values",
    "java_string",
]


class SinkWriter(abc.ABC):
    """The task side of a sink for one epoch."""

    #: Whether ``prepare_commit`` mostly waits on I/O (a flush's round trips) and may run in
    #: a thread while the task commits and snapshots its state; it must then not touch
    #: anything but the writer's own connections.
    prepare_in_background: bool = False

    @abc.abstractmethod
    def write(self, values: list[Any]) -> None:
        """Stage a batch of records."""

    @abc.abstractmethod
    def prepare_commit(self) -> list[Any]:
        """Finish the epoch's staging; the committables to hand to the driver."""


class Sink(abc.ABC):
    """A sink: configuration shipped to tasks, plus the driver's commit and abort."""

    #: Committed only on checkpoint completion (True), or as soon as the epoch succeeded.
    transactional: bool = True
    #: Whether the sink's commits run Spark jobs (a batch writer): they need task slots, so
    #: the ``auto`` epoch mode leaves the slots to Spark jobs.
    runs_spark_jobs: bool = False

    @abc.abstractmethod
    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        """A writer for one task of one epoch."""

    @abc.abstractmethod
    def commit(self, committables: Sequence[Any]) -> None:
        """Make staged output visible (idempotent)."""

    def check_restored(  # noqa: B027 - nothing to check by default
        self, committables: Sequence[Any], job_id: str, where: str, *, trusted: bool = True
    ) -> None:
        """Refuse committables a restored snapshot names for this sink that this sink could
        not have written (``UnsafeStatePathError`` naming ``where``), before any I/O.
        ``job_id``: the restoring job's (or the run a trusted snapshot continues);
        ``trusted``: whether the snapshot is the job's own or signed (docs/storage.md)."""

    def abort(self, committables: Sequence[Any]) -> None:  # noqa: B027 - no-op by default
        """Discard staged output that will never be committed (nothing staged by default)."""


def format_value(value: Any, type_info: Any = None) -> str:
    """How PyFlink's ``print()`` shows a record (see ``format_values``)."""
    return format_values([value], type_info)[0]


def format_values(values: list[Any], type_info: Any = None) -> list[str]:
    """How PyFlink's ``print()`` shows records: untyped (pickled) ones with Python's ``str``;
    a declared ``Types.ROW`` as ``+I[a,1]`` with Python's ``str`` of the fields (PyFlink
    formats rows in Python, before they reach Java); any other declared type converted as
    the trip to Java's print sink converts it, then spelled by Java's ``toString``
    (``1.0E-5``, ``true``, ``(a,1)``, ``{k=v}``)."""
    from sparkpoint.state.typeinfo import BasicTypeInfo, RowTypeInfo

    if isinstance(type_info, RowTypeInfo):
        return [_python_row_string(v) if isinstance(v, tuple) else str(v) for v in values]
    convert = batch_converter(type_info)
    if convert is None and not (
        isinstance(type_info, BasicTypeInfo) and type_info.type_name != "STRING"
    ):
        return [v if isinstance(v, str) else str(v) for v in values]
    if convert is not None:
        values = convert(values)
    return [java_format.java_string(v, type_info) for v in values]


def _python_row_string(value: tuple[Any, ...]) -> str:
    kind = value.get_row_kind() if isinstance(value, Row) else RowKind.INSERT
    return f"{kind.short_string()}[{','.join(str(v) for v in value)}]"


def java_string(value: Any, type_info: Any = None) -> str:
    """What Java's ``toString`` gives for a record of the declared type (``+I[a, 1]``,
    ``(a,1)``, ``1.0E-5``), as a file sink's string encoder writes it; ``str`` if untyped."""
    if type_info is None:
        return str(value)
    return java_format.java_string(convert_value(value, type_info), type_info)


class _ListWriter(SinkWriter):
    def __init__(self, transform: Callable[[list[Any]], list[Any]]) -> None:
        self._items: list[Any] = []
        self._transform = transform

    def write(self, values: list[Any]) -> None:
        self._items.extend(self._transform(values))

    def prepare_commit(self) -> list[Any]:
        return [self._items] if self._items else []


class PrintSink(Sink):
    """``print()``: records printed by the driver as each epoch succeeds (at-least-once, as
    Flink's print sink), prefixed with ``<subtask+1>> `` when the parallelism is above one."""

    transactional = False

    def __init__(self, type_info: Any = None, sink_identifier: str | None = None) -> None:
        self.type_info = type_info
        self.sink_identifier = sink_identifier
        self.out: Any = None  # stream to print to; sys.stdout when None

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        prefix = _print_prefix(self.sink_identifier, subtask_index, parallelism)
        ti = self.type_info
        return _ListWriter(lambda vs: [prefix + line for line in format_values(vs, ti)])

    def commit(self, committables: Sequence[Any]) -> None:
        out = self.out or sys.stdout
        for lines in committables:
            for line in lines:
                print(line, file=out)
        out.flush()


def _print_prefix(sink_identifier: str | None, subtask_index: int, parallelism: int) -> str:
    """Flink's ``PrintSinkOutputWriter`` prefix: ``id:N> ``, ``N> ``, ``id> `` or nothing."""
    prefix = sink_identifier or ""
    if parallelism > 1:
        prefix = f"{prefix}:{subtask_index + 1}" if prefix else str(subtask_index + 1)
    return f"{prefix}> " if prefix else ""


class CollectSink(Sink):
    """``execute_and_collect``: records returned to the driver, exactly once.

    A committable is the epoch's records of one subtask pickled in one go and base64-encoded:
    checkpoints keep uncommitted committables in the ``_metadata`` JSON, which could hold
    neither ``bytes``, NaN nor the difference between tuples and lists.
    """

    def __init__(self) -> None:
        self.collected: list[Any] = []

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        return _PickledListWriter()

    def commit(self, committables: Sequence[Any]) -> None:
        for packed in committables:
            self.collected.extend(pickle.loads(base64.b64decode(packed)))


class _PickledListWriter(SinkWriter):
    def __init__(self) -> None:
        self._items: list[Any] = []

    def write(self, values: list[Any]) -> None:
        self._items.extend(values)

    def prepare_commit(self) -> list[Any]:
        if not self._items:
            return []
        data = pickle.dumps(self._items, protocol=pickle.HIGHEST_PROTOCOL)
        return [base64.b64encode(data).decode("ascii")]
