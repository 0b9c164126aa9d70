"""The body of a long-running task (``sparkpoint.epoch.mode=long-running``): one Spark task
that runs the task groups the driver orders, run after run, until the driver stops it.

Per order it runs its groups in the stages' order: a source group reads its ranges; any
other group first waits for one ``DATA`` frame from every upstream group of its exchanges
(the barrier: an upstream group sends every partition of its exchange one frame, empty or
not, once its subtasks have run). Its rows go out as ``DATA`` frames (the driver relays
them to the task of each partition once the group has finished), then a ``REPORTS`` frame
ends the group (with a final stage's reports). Each group runs as in a Spark task of its
own (``task_group.run_group``): the subtasks open their state at the run's previous
accepted run, so a run the driver discards costs nothing here. An error goes to the
driver, then fails the task, so that Spark retries it: the driver orders the new attempt
the groups this one left unfinished.
"""

from __future__ import annotations

import os
import pickle
import socket
import threading
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.graph import Stage
from sparkpoint.runtime.spark.epoch_link import (
    DATA,
    FAILED,
    ORDER,
    REPORTS,
    Frame,
    Hello,
    LinkClosed,
    LinkSocket,
    decode_order,
    send_hello,
)
from sparkpoint.runtime.task.records import KIND_REPORT
from sparkpoint.runtime.task.task_group import route_rows, run_group

__all__ = ["WorkItem", "run_long_task", "sender_key"]

_CONNECT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class WorkItem:
    """One task group a long-running task runs in a run: the stage, the group's index and
    subtasks, the stage's task count, and the exchange partitions its input arrives on
    with how many frames make it complete."""

    stage_id: int
    index: int
    group: tuple[int, ...]
    num_partitions: int
    inputs: tuple[tuple[int, int], ...]  # (exchange id, partition)
    expected: int


def sender_key(stage_id: int, index: int) -> int:
    """The ``c`` field of a DATA frame: which group sent it (orders a group's input)."""
    return stage_id * 65536 + index


class _Inbox:
    """Frames from the driver, read by a background thread: orders in arrival order, rows
    by (run, exchange, partition)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._orders: list[Frame] = []
        self._data: dict[tuple[int, int, int], list[Frame]] = {}
        self._closed = False
        self._oldest_run = 0

    def read_from(self, link: LinkSocket) -> None:
        try:
            while True:
                frame = link.recv()
                with self._cond:
                    if frame.kind == DATA:
                        if frame.run >= self._oldest_run:
                            self._data.setdefault((frame.run, frame.a, frame.b), []).append(frame)
                    else:
                        self._orders.append(frame)
                    self._cond.notify_all()
        except LinkClosed:
            pass
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def next_order(self) -> Frame | None:
        """The next order, or None once the driver stopped the task or the link closed."""
        with self._cond:
            while not self._orders and not self._closed:
                self._cond.wait()
            if not self._orders:
                return None
            frame = self._orders.pop(0)
            if frame.kind != ORDER:
                return None
            self._oldest_run = frame.run
            for key in [k for k in self._data if k[0] < frame.run]:
                del self._data[key]
            return frame

    def take(self, run: int, item: WorkItem) -> list[bytes] | None:
        """The payloads of ``item``'s input in a fixed order (by exchange, then sender),
        once all of them arrived; None if the link closed first."""
        keys = [(run, ex, part) for ex, part in item.inputs]
        with self._cond:
            while sum(len(self._data.get(k, ())) for k in keys) < item.expected:
                if self._closed:
                    return None
                self._cond.wait()
            frames = [
                (i, f.c, f.payload) for i, k in enumerate(keys) for f in self._data.pop(k, ())
            ]
        frames.sort(key=lambda f: (f[0], f[1]))
        return [payload for _i, _c, payload in frames]


def _rows(payloads: list[bytes]) -> Iterator[tuple[int, int, Any]]:
    for payload in payloads:
        yield from pickle.loads(payload)


def run_long_task(
    stages: Mapping[int, Stage],
    address: tuple[str, int],
    secret: bytes,
    launch: int,
    slot: int,
) -> Iterator[int]:
    """Connect to the driver at ``address`` as task ``slot`` of launch ``launch`` and run
    its orders until it stops the task; yields the number of orders run."""
    from pyspark import TaskContext

    from sparkpoint.runtime.task.executor import current_executor

    tc = TaskContext.get()
    attempt = tc.attemptNumber() if tc is not None else 0
    executor = current_executor()
    sock = socket.create_connection(address, timeout=_CONNECT_TIMEOUT_S)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    link = LinkSocket(sock)
    runs = 0
    try:
        send_hello(
            link,
            secret,
            Hello(launch, slot, attempt, executor.executor_id, executor.host, os.getpid()),
        )
        inbox = _Inbox()
        reader = threading.Thread(
            target=inbox.read_from, args=(link,), daemon=True, name="sparkpoint-link"
        )
        reader.start()
        while True:
            order = inbox.next_order()
            if order is None:
                break
            runs += 1
            spec_bytes, work_bytes = decode_order(order.payload)
            spec, work = pickle.loads(spec_bytes), pickle.loads(work_bytes)
            try:
                if not _run_order(link, inbox, stages, spec, work, order.run, attempt):
                    break
            except LinkClosed:
                break
            except Exception:
                try:
                    link.send(FAILED, order.run, slot, 0, 0, traceback.format_exc().encode())
                except LinkClosed:
                    pass
                raise  # Spark retries the task (as often as spark.task.maxFailures allows)
    finally:
        link.close()
    yield runs


def _run_order(
    link: LinkSocket,
    inbox: _Inbox,
    stages: Mapping[int, Stage],
    spec: Any,
    work: list[WorkItem],
    run: int,
    attempt: int,
) -> bool:
    """Run one order's groups; whether the link is still open."""
    for item in work:
        stage = stages[item.stage_id]
        rows: Iterator[tuple[int, int, Any]] | None = None
        if stage.source is None:
            payloads = inbox.take(run, item)
            if payloads is None:
                return False
            rows = _rows(payloads)
        out = run_group(spec, stage, item.group, rows, attempt, item.num_partitions)
        by_partition = route_rows(spec, stage, out)
        reports = b""
        if by_partition is None:
            reports = pickle.dumps([p for _sub, kind, p in out if kind == KIND_REPORT], 5)
        else:
            assert stage.out_exchange is not None
            sender = sender_key(stage.id, item.index)
            for part, part_rows in enumerate(by_partition):
                link.send(DATA, run, stage.out_exchange, part, sender, pickle.dumps(part_rows, 5))
        link.send(REPORTS, run, item.stage_id, item.index, 0, reports)
    return True
