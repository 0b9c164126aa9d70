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

from sparkpoint.types import Row

__all__ = ["CollectSink", "PrintSink", "Sink", "SinkWriter", "format_value"]


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
    """How Flink prints a record: tuples as ``(a,b)``, rows as ``+I[a, b]``, else ``str``."""
    if isinstance(value, Row):
        return repr(value) if hasattr(value, "get_row_kind") else str(value)
    if isinstance(value, tuple) and type_info is not None and "Tuple" in type(type_info).__name__:
        return "(" + ",".join(format_value(v) for v in value) + ")"
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
        prefix = f"{subtask_index + 1}> " if parallelism > 1 else ""
        if self.sink_identifier:
            prefix = f"{self.sink_identifier}:{prefix or ' '}"
        ti = self.type_info
        return _ListWriter(lambda vs: [prefix + format_value(v, ti) for v in vs])

    def commit(self, committables: Sequence[Any]) -> None:
        out = self.out or sys.stdout
        for lines in committables:
            for line in lines:
                print(line, file=out)
        out.flush()


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
