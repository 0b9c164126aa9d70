"""A sink writer whose ``prepare_commit`` waits on I/O (``prepare_in_background``) runs it in a
thread from the epoch's end until ``StageTree.finish_sinks``, while the task snapshots its
state: its committables reach the report only once it is done, and its error fails the task."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from sparkpoint.connectors.sink import Sink, SinkWriter
from sparkpoint.runtime.graph import Node, NodeKind
from sparkpoint.runtime.protocol import SinkOutput
from sparkpoint.runtime.task.stage_tree import SinkOperator, StageTree


class _Writer(SinkWriter):
    def __init__(self, background: bool, release: threading.Event, fail: bool) -> None:
        self.prepare_in_background = background
        self.release = release
        self.fail = fail
        self.written: list[Any] = []
        self.thread: str | None = None

    def write(self, values: list[Any]) -> None:
        self.written.extend(values)

    def prepare_commit(self) -> list[Any]:
        self.thread = threading.current_thread().name
        assert self.release.wait(10)
        if self.fail:
            raise RuntimeError("the flush failed")
        return [{"records": len(self.written)}]


class _Sink(Sink):
    def __init__(self, writer: _Writer) -> None:
        self.writer = writer

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        return self.writer

    def commit(self, committables: Sequence[Any]) -> None:
        pass


def _operator(writer: _Writer) -> tuple[SinkOperator, list[SinkOutput]]:
    node = Node(1, NodeKind.SINK, "Sink", [Node(0, NodeKind.SOURCE, "Source")])
    node.sink = _Sink(writer)
    outputs: list[SinkOutput] = []
    op = SinkOperator(node, outputs)
    op.open(SimpleNamespace(job_id="j", epoch=3, subtask_index=1, parallelism=2, attempt_number=0))
    return op, outputs


def test_the_prepare_runs_in_a_thread_until_the_sinks_are_finished() -> None:
    release = threading.Event()
    writer = _Writer(True, release, fail=False)
    op, outputs = _operator(writer)
    op.push([1, 2, 3], None)
    op.end_epoch()  # returns while the flush waits: the task snapshots meanwhile
    assert outputs == []
    release.set()
    StageTree([op], {}).finish_sinks()
    assert writer.thread == "sparkpoint-sink-prepare"
    assert outputs == [SinkOutput(op.operator_id, 1, ({"records": 3},), True)]
    StageTree([op], {}).finish_sinks()  # nothing left to wait for: no second output
    assert len(outputs) == 1


def test_an_error_of_the_prepare_fails_the_task_at_the_finish() -> None:
    release = threading.Event()
    op, outputs = _operator(_Writer(True, release, fail=True))
    op.push([1], None)
    op.end_epoch()
    release.set()
    with pytest.raises(RuntimeError, match="the flush failed"):
        StageTree([op], {}).finish_sinks()
    assert outputs == []


def test_a_writer_that_does_not_ask_prepares_in_the_task() -> None:
    release = threading.Event()
    release.set()
    writer = _Writer(False, release, fail=False)
    op, outputs = _operator(writer)
    op.end_epoch()
    assert writer.thread == threading.current_thread().name
    assert outputs == [SinkOutput(op.operator_id, 1, ({"records": 0},), True)]
