"""Two-phase-commit sinks: tasks stage each epoch's output, the driver commits on checkpoint.

A sink's ``create_writer`` runs in the task and returns committables (small, picklable
descriptions of staged output). The driver holds them per epoch and calls ``commit`` once
the checkpoint covering that epoch completes, or ``abort`` when a restore discards them.
Commits are idempotent, so a driver that dies between checkpoint and commit can redo them.
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.types import Row, RowKind

__all__ = ["CollectSink", "PrintSink", "Sink", "SinkWriter", "format_value", "java_string"]


class SinkWriter(abc.ABC):
    """The task side of a sink for one epoch."""

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

    @abc.abstractmethod
    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        """A writer for one task of one epoch."""

    @abc.abstractmethod
    def commit(self, committables: Sequence[Any]) -> None:
        """Make staged output visible (idempotent)."""

    def abort(self, committables: Sequence[Any]) -> None:  # noqa: B027 - no-op by default
        """Discard staged output that will never be committed (nothing staged by default)."""


def format_value(value: Any, type_info: Any = None) -> str:
    """How PyFlink's ``print()`` shows a record: a declared ``Types.ROW`` as ``+I[a,1]``
    (PyFlink formats rows in Python), a declared ``Types.TUPLE`` as Java's ``(a,1)``, and
    anything else (pickled records) as Python's ``str``."""
    from sparkpoint.state.typeinfo import RowTypeInfo, TupleTypeInfo

    if isinstance(type_info, RowTypeInfo) and isinstance(value, tuple):
        kind = value.get_row_kind() if isinstance(value, Row) else RowKind.INSERT
        return f"{kind.short_string()}[{','.join(str(v) for v in value)}]"
    if isinstance(type_info, TupleTypeInfo) and isinstance(value, tuple):
        return _java_string(value)
    return str(value)


def java_string(value: Any, type_info: Any = None) -> str:
    """What Java's ``toString`` gives for a record of a declared ``Types.ROW``/``Types.TUPLE``
    (``+I[a, 1]``, ``(a,1)``), as a file sink's string encoder writes it; else ``str``."""
    from sparkpoint.state.typeinfo import RowTypeInfo, TupleTypeInfo

    if isinstance(type_info, RowTypeInfo) and isinstance(value, tuple) and not isinstance(
        value, Row
    ):
        value = Row(*value)
    if isinstance(type_info, (RowTypeInfo, TupleTypeInfo)) and isinstance(value, tuple):
        return _java_string(value)
    return str(value)


def _java_string(value: Any) -> str:
    """Java's ``toString`` of a field: null, true/false, ``+I[a, b]``, ``(a,b)``, ``[a, b]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Row):
        kind = value.get_row_kind().short_string()
        return f"{kind}[{', '.join(_java_string(v) for v in value)}]"
    if isinstance(value, tuple):
        return "(" + ",".join(_java_string(v) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_java_string(v) for v in value) + "]"
    return str(value)


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
        return _ListWriter(lambda vs: [prefix + format_value(v, ti) for v in vs])

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
    """``execute_and_collect``: records returned to the driver, exactly once."""

    def __init__(self) -> None:
        self.collected: list[Any] = []

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        return _ListWriter(list)

    def commit(self, committables: Sequence[Any]) -> None:
        for items in committables:
            self.collected.extend(items)
