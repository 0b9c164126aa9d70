"""Epochs without a Spark job each (``sparkpoint.epoch.mode=long-running``): one Spark job
whose tasks live for many epochs, as Spark's continuous mode runs its tasks.

- One long-running task per task slot of every live executor, all scheduled at once
  (pinned: task ``i`` prefers its executor), each connected to the driver
  (``epoch_link``). The job needs every slot of the cluster while it runs.
- A run of an epoch is laid out as in the job mode (``epoch.layout``, one group per slot
  and stage at most); each group goes to a task on its executor (a keyed group to a task
  where its subtasks' state is), and every task gets one order. Rows between stages go
  through the driver, which relays each ``DATA`` frame to the task of its partition; the
  final stages' tasks send the reports.
- Any failure (a task's error, a Python worker or executor gone, a task ending) ends the
  Spark job: the run is lost and raised as ``TasksLost`` (the epoch runs again, as after a
  lost executor, in a new launch of the tasks), or, once the epoch has failed as often as
  Spark's ``spark.task.maxFailures`` allows a task, as ``EpochTaskFailed`` with the
  task's error (the job fails over, as when Spark gives up a task). The subtasks of a
  discarded run open their state at the previous accepted run, as in the job mode.
- A new executor, or a lost one, relaunches the tasks before the next run.

What it saves per epoch: the Spark job's submission, every task's launch, closure and
Python worker hand-over, and the shuffle's files; what stays: reading, processing, the
sinks' flush, the snapshot and the commit.
"""

from __future__ import annotations

import logging
import pickle
import queue
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.errors import ConfigurationError, SparkpointError
from sparkpoint.runtime.graph import Plan, Stage
from sparkpoint.runtime.protocol import EpochSpec, JobSpec, TaskReport
from sparkpoint.runtime.spark.epoch import (
    EpochRunner,
    ExecutorsLost,
    job_group,
    layout,
    stage_partitions,
)
from sparkpoint.runtime.spark.epoch_link import (
    DATA,
    FAILED,
    ORDER,
    REPORTS,
    STOP,
    Frame,
    Hello,
    LinkClosed,
    LinkSocket,
    encode_order,
    new_secret,
    read_hello,
)
from sparkpoint.runtime.spark.long_running_task import WorkItem, run_long_task

__all__ = ["EpochTaskFailed", "LongRunningRunner", "TasksLost"]

_LOG = logging.getLogger(__name__)
_WATCH_INTERVAL_S = 0.25
_REGISTER_TIMEOUT_S = 60.0
_HELLO_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 30.0
# Spark's words for a Python worker that died mid-task (runtime/driver/failures.py reads
# them to tell a crash after a restore from other failures).
_WORKER_CRASHED = "Python worker exited unexpectedly (crashed)"
_LOCAL_FAILURES = re.compile(r"^local\[[^,\]]+,\s*(\d+)\]$")


class TasksLost(ExecutorsLost):
    """A long-running task failed or its Python worker died during a run: the run was
    discarded and the tasks are launched again (the epoch runs again)."""

    def __init__(self, detail: str) -> None:
        SparkpointError.__init__(self, f"Long-running tasks lost during the epoch: {detail}")
        self.executors = []


class EpochTaskFailed(SparkpointError):
    """A long-running task failed as often in one epoch as Spark lets a task fail: the
    message carries the task's error (its traceback, as Spark's error carries it)."""


@dataclass
class _Slot:
    hello: Hello
    link: LinkSocket
    location: str


def _max_failures(conf: Any, master: str) -> int:
    """How often Spark lets one task fail before it fails the job (``local[N, F]``: F;
    other local masters: 1; clusters: ``spark.task.maxFailures``)."""
    found = _LOCAL_FAILURES.match(master)
    if found:
        return max(1, int(found.group(1)))
    if master == "local" or master.startswith("local["):
        return 1
    return max(1, int(conf.get("spark.task.maxFailures", "4")))


def _topological(plan: Plan) -> list[Stage]:
    """The stages, every stage after the stages feeding its exchanges."""
    done: set[int] = set()
    order: list[Stage] = []

    def visit(st: Stage) -> None:
        if st.id in done:
            return
        done.add(st.id)
        for ex_id in st.exchanges:
            for up in plan.exchanges[ex_id].ups:
                visit(up)
        order.append(st)

    for st in plan.stages:
        visit(st)
    return order


class LongRunningRunner:
    """Runs the epochs of one job in long-running tasks (the same calls as
    ``EpochRunner``)."""

    def __init__(
        self, spark: Any, plan: Plan, tasks_per_core: int = 2, full_range: int | None = None
    ) -> None:
        self._epochs = EpochRunner(spark, plan, 1, full_range)
        if self._epochs.profiles:
            raise ConfigurationError(
                "sparkpoint.epoch.mode=long-running cannot run stages with slot sharing "
                "group resources (stage-level scheduling needs a Spark job per stage); use "
                "sparkpoint.epoch.mode=job"
            )
        self.cluster = self._epochs.cluster
        self.plan = plan
        self.full_range = full_range
        self._order = _topological(plan)
        self._stages = {st.id: st for st in plan.stages}
        sc = self.cluster.sc
        conf = sc.getConf()
        self._max_failures = _max_failures(conf, str(sc.master))
        host = conf.get("spark.driver.host", "127.0.0.1")
        bind = conf.get("spark.driver.bindAddress", host)
        self._server = socket.create_server((bind, 0))
        self._address = (host, self._server.getsockname()[1])
        self._secret = new_secret()
        self._lock = threading.Lock()
        self._launch = 0  # generation: frames and connections of an older one are ignored
        self._launches = 0
        self._slot_count = 0
        self._slots: dict[int, _Slot] = {}
        self._registered = threading.Condition(self._lock)
        self._executors: frozenset[str] = frozenset()
        self._job: threading.Thread | None = None
        self._job_error: list[BaseException] = []
        self._tag = ""
        self._events: queue.Queue[tuple[int, str, int, Any]] = queue.Queue()
        self._dest: dict[tuple[int, int], int] = {}  # (exchange, partition) -> slot
        self._run = -1
        self._failures: tuple[int, int] = (-1, 0)  # (epoch, failed runs)
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="sparkpoint-link-accept").start()

    # -- connections -------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                sock, _peer = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._serve, args=(sock,), daemon=True, name="sparkpoint-link"
            ).start()

    def _serve(self, sock: socket.socket) -> None:
        link = LinkSocket(sock)
        sock.settimeout(_HELLO_TIMEOUT_S)
        try:
            hello = read_hello(link, self._secret)
        except (LinkClosed, OSError) as exc:
            _LOG.warning("Refused a connection to the long-running task endpoint: %s", exc)
            link.close()
            return
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        slot = self.cluster.live_executors().get(hello.executor_id)  # Py4J: not under the lock
        with self._lock:
            if hello.launch != self._launch or hello.slot in self._slots or slot is None:
                link.close()
                return
            self._slots[hello.slot] = _Slot(hello, link, slot.location)
            self._registered.notify_all()
        try:
            while True:
                frame = link.recv()
                if frame.kind == DATA:
                    self._relay(frame)
                elif frame.kind in (REPORTS, FAILED):
                    self._events.put((hello.launch, "frame", hello.slot, frame))
                else:
                    raise LinkClosed(f"unexpected frame kind {frame.kind} from a task")
        except LinkClosed as exc:
            self._events.put((hello.launch, "lost", hello.slot, str(exc)))
        finally:
            link.close()

    def _relay(self, frame: Frame) -> None:
        with self._lock:
            if frame.run != self._run:
                return  # a discarded run's rows
            target = self._slots.get(self._dest.get((frame.a, frame.b), -1))
        if target is not None:
            try:
                target.link.forward(frame)
            except LinkClosed:
                pass  # its own connection reports it

    # -- the Spark job of the tasks ------------------------------------------------------
    def _launch_tasks(self, job: JobSpec) -> None:
        """Start one task per slot of every live executor and wait until all connected."""
        self._teardown()
        live = self.cluster.live_executors()
        locations = [s.location for _e, s in sorted(live.items()) for _ in range(s.cores)]
        self._launches += 1
        number = self._launches
        with self._lock:
            self._launch += 1
            self._slot_count = len(locations)
            self._executors = frozenset(live)
            launch = self._launch
        stages, address, secret = self._stages, self._address, self._secret

        def body(partition: int, items: Iterator[Any]) -> Iterator[int]:
            for _ in items:
                pass
            return run_long_task(stages, address, secret, launch, partition)

        from pyspark import RDD
        from pyspark.serializers import NoOpSerializer

        sc = self.cluster.sc
        base: Any = RDD(self.cluster.pinned_rdd(locations, 1), sc, NoOpSerializer())
        rdd = base.mapPartitionsWithIndex(body)
        self._tag = tag = f"sparkpoint-long-running-{id(self)}-{launch}"
        errors: list[BaseException] = []
        self._job_error = errors

        def collect() -> None:
            previous = self.cluster.tag_jobs(tag)
            described = self.cluster.describe_jobs(
                job_group(job.job_id),
                f"sparkpoint {job.job_name} long-running tasks (launch {number})",
            )
            try:
                rdd.collect()
            except BaseException as exc:  # reported to the runner
                errors.append(exc)
            finally:
                self.cluster.untag_jobs(tag, previous)
                self.cluster.restore_description(described)
                self._events.put((launch, "ended", -1, None))

        self._job = threading.Thread(target=collect, daemon=True, name=tag)
        self._job.start()
        deadline = time.monotonic() + _REGISTER_TIMEOUT_S
        with self._lock:
            while len(self._slots) < self._slot_count:
                left = deadline - time.monotonic()
                if left <= 0 or not self._job.is_alive():
                    break
                self._registered.wait(min(left, _WATCH_INTERVAL_S))
            started = len(self._slots)
        if started < self._slot_count:
            self._teardown()
            detail = f": {errors[0]}" if errors else ""
            raise SparkpointError(
                f"sparkpoint.epoch.mode=long-running needs all {self._slot_count} task slots "
                f"of the cluster at once; {started} of its tasks started within "
                f"{_REGISTER_TIMEOUT_S:.0f} s{detail}. Other Spark jobs may hold slots: run "
                "this job alone, or use sparkpoint.epoch.mode=job"
            )

    def _teardown(self) -> None:
        """Stop the tasks (if any) and wait for their Spark job to end."""
        with self._lock:
            slots = list(self._slots.values())
            self._slots.clear()
            self._launch += 1  # late connections and events of the old launch are ignored
            job, tag = self._job, self._tag
            self._job = None
        for slot in slots:
            try:
                slot.link.send(STOP, 0, 0, 0, 0)
            except LinkClosed:
                pass
            slot.link.close()
        if job is not None:
            job.join(_STOP_TIMEOUT_S / 2)
            if job.is_alive():
                self.cluster.cancel_tagged(tag)
                job.join(_STOP_TIMEOUT_S)

    def _needs_launch(self) -> bool:
        live = frozenset(self.cluster.live_executors())
        with self._lock:
            return (
                self._job is None
                or not self._job.is_alive()
                or live != self._executors
                or len(self._slots) < self._slot_count
            )

    # -- one run -------------------------------------------------------------------------
    def run(
        self, spec: EpochSpec, locations: Mapping[int, list[str]], watch: set[str]
    ) -> list[TaskReport]:
        """Run the epoch; returns every subtask's report. Raises ``ExecutorsLost`` when an
        executor in ``watch`` leaves, ``TasksLost`` when a task fails or its worker dies."""
        if self._closed:
            raise SparkpointError("the long-running tasks of this job were stopped")
        if self._needs_launch():
            self._launch_tasks(spec.job)
        with self._lock:
            slots = dict(self._slots)
            launch = self._launch
        by_location: dict[str, list[int]] = {}
        for index in sorted(slots):
            by_location.setdefault(slots[index].location, []).append(index)
        cores = {loc: len(indexes) for loc, indexes in by_location.items()}
        spec = layout(self.plan, spec, locations, cores, 1, self.full_range)
        work, dest = self._assign(spec, locations, sorted(slots), by_location)
        with self._lock:
            self._run = spec.run
            self._dest = dest
        from pyspark import cloudpickle  # the spec holds the job's functions, as a closure

        spec_bytes = cloudpickle.dumps(spec, 5)  # once per run: the same for every task
        try:
            for index, items in work.items():
                order = encode_order(spec_bytes, pickle.dumps(items, 5))
                slots[index].link.send(ORDER, spec.run, 0, 0, 0, order)
        except LinkClosed as exc:
            self._lost(spec, f"could not send the orders: {exc}")
        return self._gather(spec, set(work), launch, watch)

    def _assign(
        self,
        spec: EpochSpec,
        locations: Mapping[int, list[str]],
        slots: list[int],
        by_location: Mapping[str, list[int]],
    ) -> tuple[dict[int, list[WorkItem]], dict[tuple[int, int], int]]:
        """Each slot's work items, in the stages' order, and the slot of every exchange
        partition."""
        groups = spec.task_groups
        counts = stage_partitions(self.plan, spec)
        slot_of: dict[tuple[int, int], int] = {}
        for st in self._order:
            placed: dict[str, int] = {}
            for j, group in enumerate(groups[st.id]):
                loc = ""
                if st.keyed:
                    subtask_locations = locations.get(st.id, [])
                    loc = subtask_locations[group[0]] if group[0] < len(subtask_locations) else ""
                candidates = by_location.get(loc) or slots
                k = placed.get(loc, 0)
                placed[loc] = k + 1
                slot_of[(st.id, j)] = candidates[(k if loc in by_location else j) % len(candidates)]
        dest: dict[tuple[int, int], int] = {}
        firsts: dict[tuple[int, int], int] = {}
        for ex in self.plan.exchanges:
            base = 0
            for c in ex.consumers:
                firsts[(ex.id, c.id)] = base
                for j in range(len(groups[c.id])):
                    dest[(ex.id, base + j)] = slot_of[(c.id, j)]
                base += len(groups[c.id])
        work: dict[int, list[WorkItem]] = {}
        for st in self._order:
            expected = sum(
                len(groups[up.id])
                for ex_id in st.exchanges
                for up in self.plan.exchanges[ex_id].ups
            )
            for j, group in enumerate(groups[st.id]):
                inputs = tuple((ex_id, firsts[(ex_id, st.id)] + j) for ex_id in st.exchanges)
                item = WorkItem(st.id, j, group, counts[st.id], inputs, expected)
                work.setdefault(slot_of[(st.id, j)], []).append(item)
        return work, dest

    def _gather(
        self, spec: EpochSpec, waiting: set[int], launch: int, watch: set[str]
    ) -> list[TaskReport]:
        reports: list[TaskReport] = []
        while waiting:
            try:
                event_launch, kind, index, value = self._events.get(timeout=_WATCH_INTERVAL_S)
            except queue.Empty:
                gone = sorted(watch - set(self.cluster.executor_ids())) if watch else []
                if gone:
                    self._teardown()
                    raise ExecutorsLost(gone) from None
                continue
            if event_launch != launch:
                continue  # an earlier launch's
            if kind == "frame" and value.kind == REPORTS and value.run == spec.run:
                reports.extend(pickle.loads(value.payload))
                waiting.discard(index)
            elif kind == "frame" and value.kind == FAILED:
                self._lost(spec, value.payload.decode(errors="replace"))
            elif kind == "lost":
                self._lost(
                    spec, f"{_WORKER_CRASHED}: the task of slot {index} disconnected ({value})"
                )
            elif kind == "ended":
                errors = self._job_error
                self._lost(spec, f"the tasks' Spark job ended: {errors[0] if errors else 'done'}")
        return reports

    def _lost(self, spec: EpochSpec, detail: str) -> None:
        """End the tasks and raise for the run: ``TasksLost``, or ``EpochTaskFailed`` once
        the epoch has failed ``spark.task.maxFailures`` times."""
        self._teardown()
        epoch, failed = self._failures
        failed = failed + 1 if epoch == spec.epoch else 1
        self._failures = (spec.epoch, failed)
        if failed >= self._max_failures:
            raise EpochTaskFailed(
                f"A long-running task failed {failed} times in epoch {spec.epoch}: {detail}"
            )
        raise TasksLost(detail.strip().splitlines()[-1][:500])  # the job master logs it

    # -- the end -----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the tasks and the endpoint (the job ended)."""
        if self._closed:
            return
        self._closed = True
        self._teardown()
        self._server.close()

    def cleanup(
        self, job: JobSpec, executors: Mapping[str, str], aborted: frozenset[int] = frozenset()
    ) -> int:
        """Stop the tasks, then delete the job's local state as ``EpochRunner.cleanup``."""
        self.close()
        return self._epochs.cleanup(job, executors, aborted)
