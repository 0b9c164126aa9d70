"""Epochs without a Spark job each (``sparkpoint.epoch.mode=long-running``): tasks that live
for many epochs, as Spark's continuous mode runs its tasks.

- One long-running task per task slot of every live executor, all started at once, each
  a Spark job of one task pinned to its executor and connected to the driver
  (``epoch_link``). The job needs every slot of the cluster while it runs.
- A run of an epoch is laid out as in the job mode (``epoch.layout``, one group per slot
  and stage at most); each group goes to a task on its executor (a keyed group to a task
  where its subtasks' state is), and every task gets one order. Rows between stages go
  through the driver, which relays each ``DATA`` frame to the task of its partition once
  the sending group has finished; every group ends with a ``REPORTS`` frame (a final
  stage's with its reports).
- A task's failure (its error, or its Python worker killed) costs only its own groups:
  Spark retries the task on its executor, and the driver orders the new attempt the groups
  the lost one had not finished, with the rows already relayed to them. A group's rows are
  relayed only once it has finished (its ``REPORTS`` frame), so consumers never see two
  attempts' rows, as Spark's shuffle shows one attempt's map output. A group that fails
  as often in an epoch as ``spark.task.maxFailures`` lets a Spark task raises
  ``EpochTaskFailed`` with the task's error (the job fails over, as when Spark gives up a
  task). A lost executor, a task that does not come back, or the tasks' Spark job ending
  loses the whole run (``TasksLost``: the epoch runs again in a new launch of the tasks).
  The subtasks of a run's groups open their state at the previous accepted run, as in the
  job mode, so a group run again starts where the lost attempt started.
- A slot's Spark job that ends (Spark used up its attempts at the task) is submitted again,
  so kills spread over many epochs never add up to a lost run. A new executor, or a lost
  one, relaunches every task before the next run.

What it saves per epoch: the Spark job's submission, every task's launch, closure and
Python worker hand-over, and the shuffle's files; what stays: reading, processing, the
sinks' flush, the snapshot and the commit.
"""

from __future__ import annotations

import itertools
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
from sparkpoint.runtime.spark.long_running_task import WorkItem, run_long_task, sender_key

__all__ = ["EpochTaskFailed", "LaunchFailed", "LongRunningRunner", "TasksLost"]

_LOG = logging.getLogger(__name__)
_WATCH_INTERVAL_S = 0.25
_REGISTER_TIMEOUT_S = 60.0
_HELLO_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 30.0
_REJOIN_WAIT_S = 10.0  # between runs: a retried task reconnecting before a relaunch
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


class LaunchFailed(SparkpointError):
    """The tasks could not all start in time: other Spark jobs hold task slots, or the
    executors cannot reach the driver."""


class EpochTaskFailed(SparkpointError):
    """A long-running task failed as often in one epoch as Spark lets a task fail: the
    message carries the task's error (its traceback, as Spark's error carries it)."""


@dataclass
class _Slot:
    hello: Hello
    link: LinkSocket
    location: str
    conn: int  # which connection: a retried task reconnects under the same slot


@dataclass
class _Run:
    """The driver's view of one run while it is gathered (guarded by the runner's lock)."""

    run: int
    items: dict[int, WorkItem]  # by sender key
    slot_items: dict[int, list[int]]  # slot -> its items' keys, in the stages' order
    dest: dict[tuple[int, int], int]  # (exchange, partition) -> slot
    locations: dict[int, str]  # slot -> its executor's location at the orders
    ready: dict[int, int]  # slot -> the connection that has this run's order
    pending: dict[int, list[Frame]]  # rows of unfinished groups, by sender
    delivered: dict[tuple[int, int], list[Frame]]  # rows relayed to unfinished groups
    done: set[int]


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

    long_running = True

    def __init__(
        self,
        spark: Any,
        plan: Plan,
        tasks_per_core: int = 2,
        full_range: int | None = None,
        launch_timeout_s: float = _REGISTER_TIMEOUT_S,
        jobs: EpochRunner | None = None,
    ) -> None:
        # The job's Spark side (its cluster, stage profiles, local state cleanup): the
        # auto mode's own runner of Spark jobs, so that is looked up and warned about once.
        self._epochs = jobs if jobs is not None else EpochRunner(spark, plan, 1, full_range)
        self._launch_timeout_s = launch_timeout_s
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
        self._slot_jobs: dict[int, threading.Thread] = {}  # slot -> its Spark job's thread
        self._locations: list[str] = []  # slot -> its executor's location
        self._tag = ""
        # (launch, kind, slot, connection, value)
        self._events: queue.Queue[tuple[int, str, int, int, Any]] = queue.Queue()
        self._conns = itertools.count(1)
        self._current: _Run | None = None
        self._failures: tuple[int, int] = (-1, 0)  # (epoch, whole runs lost)
        self._group_failures: tuple[int, dict[int, int]] = (-1, {})  # (epoch, per group)
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
        conn = next(self._conns)
        with self._lock:
            if (
                hello.launch != self._launch
                or hello.slot in self._slots
                or not 0 <= hello.slot < self._slot_count
                or slot is None
            ):
                link.close()
                return
            self._slots[hello.slot] = _Slot(hello, link, slot.location, conn)
            self._registered.notify_all()
            self._events.put((hello.launch, "joined", hello.slot, conn, None))
        detail = "closed"
        try:
            while True:
                frame = link.recv()
                if frame.kind == DATA:
                    self._hold(frame)
                elif frame.kind == REPORTS:
                    if self._finished(frame):
                        self._events.put((hello.launch, "frame", hello.slot, conn, frame))
                elif frame.kind == FAILED:
                    self._events.put((hello.launch, "frame", hello.slot, conn, frame))
                else:
                    raise LinkClosed(f"unexpected frame kind {frame.kind} from a task")
        except LinkClosed as exc:
            detail = str(exc)
        finally:
            link.close()
            with self._lock:
                current = self._slots.get(hello.slot)
                if current is not None and current.conn == conn:
                    del self._slots[hello.slot]
                    run = self._current
                    if run is not None:
                        for key in run.slot_items.get(hello.slot, ()):
                            if key not in run.done:
                                run.pending.pop(key, None)  # a lost attempt's rows
                self._events.put((hello.launch, "lost", hello.slot, conn, detail))

    def _hold(self, frame: Frame) -> None:
        """Keep a group's rows until the group has finished (then ``_finished`` relays
        them), so that no consumer sees rows of an attempt that is lost later."""
        with self._lock:
            run = self._current
            if run is None or frame.run != run.run or frame.c not in run.items:
                return  # a discarded run's rows
            if frame.c not in run.done:
                run.pending.setdefault(frame.c, []).append(frame)

    def _finished(self, frame: Frame) -> bool:
        """A group's ``REPORTS``: mark it done and relay its rows; False for a frame of a
        discarded run or a group already done."""
        key = sender_key(frame.a, frame.b)
        with self._lock:
            run = self._current
            if run is None or frame.run != run.run or key not in run.items or key in run.done:
                return False
            run.done.add(key)
            for ex_part in run.items[key].inputs:
                run.delivered.pop(ex_part, None)  # it will not run again
            sends = []
            for row in run.pending.pop(key, []):
                target = run.dest.get((row.a, row.b))
                if target is None:
                    continue
                run.delivered.setdefault((row.a, row.b), []).append(row)
                slot = self._slots.get(target)
                if slot is not None and run.ready.get(target) == slot.conn:
                    sends.append((slot.link, row))
        for link, row in sends:
            try:
                link.forward(row)
            except LinkClosed:
                pass  # its own connection reports it; the rows are sent again on its return
        return True

    # -- the Spark jobs of the tasks -----------------------------------------------------
    def _launch_tasks(self, job: JobSpec) -> None:
        """Start one task per slot of every live executor, each a Spark job of its own, and
        wait until all connected."""
        self._teardown()
        deadline = time.monotonic() + self._launch_timeout_s
        live = self.cluster.live_executors()
        while not live and time.monotonic() < deadline:  # all lost: Spark may add one
            time.sleep(_WATCH_INTERVAL_S)
            live = self.cluster.live_executors()
        if not live:
            raise LaunchFailed(
                f"sparkpoint.epoch.mode=long-running found no live executor within "
                f"{self._launch_timeout_s:.0f} s"
            )
        locations = [s.location for _e, s in sorted(live.items()) for _ in range(s.cores)]
        self._launches += 1
        with self._lock:
            self._launch += 1
            self._slot_count = len(locations)
            self._executors = frozenset(live)
            self._locations = locations
            self._tag = f"sparkpoint-long-running-{id(self)}-{self._launch}"
        for slot in range(len(locations)):
            self._submit(job, slot)
        started = self._await_slots(self._launch_timeout_s)
        if started < self._slot_count:
            self._teardown()
            raise LaunchFailed(
                f"sparkpoint.epoch.mode=long-running needs all {self._slot_count} task slots "
                f"of the cluster at once; {started} of its tasks started within "
                f"{self._launch_timeout_s:.0f} s. Other Spark jobs may hold slots: run "
                "this job alone, or use sparkpoint.epoch.mode=job"
            )

    def _submit(self, job: JobSpec, slot: int) -> None:
        """Start slot ``slot``'s task as a Spark job of one task, pinned to its executor.
        A job per slot keeps Spark's attempts per task to that slot: a killed task that
        used them all ends only its own job, which the runner submits again."""
        from pyspark import RDD
        from pyspark.serializers import NoOpSerializer

        with self._lock:
            launch, tag, location = self._launch, self._tag, self._locations[slot]
        stages, address, secret = self._stages, self._address, self._secret
        number = self._launches

        def body(_partition: int, items: Iterator[Any]) -> Iterator[int]:
            for _ in items:
                pass
            return run_long_task(stages, address, secret, launch, slot)

        sc = self.cluster.sc
        base: Any = RDD(self.cluster.pinned_rdd([location], 1), sc, NoOpSerializer())
        rdd = base.mapPartitionsWithIndex(body)

        def collect() -> None:
            previous = self.cluster.tag_jobs(tag)
            described = self.cluster.describe_jobs(
                job_group(job.job_id),
                f"sparkpoint {job.job_name} long-running task {slot} (launch {number})",
            )
            error: BaseException | None = None
            try:
                rdd.collect()
            except BaseException as exc:  # reported to the runner
                error = exc
            finally:
                self.cluster.untag_jobs(tag, previous)
                self.cluster.restore_description(described)
                self._events.put((launch, "ended", slot, 0, (threading.current_thread(), error)))

        thread = threading.Thread(target=collect, daemon=True, name=f"{tag}-{slot}")
        with self._lock:
            self._slot_jobs[slot] = thread
        thread.start()

    def _await_slots(self, timeout_s: float) -> int:
        """Wait until every slot's task is connected (or ``timeout_s``); how many are."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while len(self._slots) < self._slot_count:
                left = deadline - time.monotonic()
                if left <= 0 or not any(t.is_alive() for t in self._slot_jobs.values()):
                    break
                self._registered.wait(min(left, _WATCH_INTERVAL_S))
            return len(self._slots)

    def _teardown(self) -> None:
        """Stop the tasks (if any) and wait for their Spark jobs to end."""
        with self._lock:
            slots = list(self._slots.values())
            self._slots.clear()
            self._current = None
            self._launch += 1  # late connections and events of the old launch are ignored
            jobs, tag = list(self._slot_jobs.values()), self._tag
            self._slot_jobs = {}
        for slot in slots:
            try:
                slot.link.send(STOP, 0, 0, 0, 0)
            except LinkClosed:
                pass
            slot.link.close()
        deadline = time.monotonic() + _STOP_TIMEOUT_S / 2
        for job in jobs:
            job.join(max(0.0, deadline - time.monotonic()))
        if any(job.is_alive() for job in jobs):
            self.cluster.cancel_tagged(tag)
            for job in jobs:
                job.join(_STOP_TIMEOUT_S)

    def _needs_launch(self, job: JobSpec) -> bool:
        """Whether the tasks must be launched again before a run: none yet, the executors
        changed, or a task did not come back in time (a slot whose Spark job ended is
        submitted again first)."""
        live = frozenset(self.cluster.live_executors())
        with self._lock:
            if not self._slot_jobs or live != self._executors:
                return True
            ended = [
                slot
                for slot, thread in self._slot_jobs.items()
                if not thread.is_alive() and slot not in self._slots
            ]
        for slot in ended:
            self._submit(job, slot)
        return self._await_slots(_REJOIN_WAIT_S) < self._slot_count

    # -- one run -------------------------------------------------------------------------
    def run(
        self, spec: EpochSpec, locations: Mapping[int, list[str]], watch: set[str]
    ) -> list[TaskReport]:
        """Run the epoch; returns every subtask's report. A failed task's groups run again
        within the run; raises ``ExecutorsLost`` when an executor in ``watch`` leaves,
        ``TasksLost`` when the run is lost, ``EpochTaskFailed`` when a group failed
        ``spark.task.maxFailures`` times in the epoch."""
        if self._closed:
            raise SparkpointError("the long-running tasks of this job were stopped")
        if self._needs_launch(spec.job):
            self._launch_tasks(spec.job)
        with self._lock:
            slots = dict(self._slots)
            launch = self._launch
        if not slots:  # every task was lost since the launch (an executor gone)
            self._lost(spec, "no long-running task is connected")
        by_location: dict[str, list[int]] = {}
        for index in sorted(slots):
            by_location.setdefault(slots[index].location, []).append(index)
        cores = {loc: len(indexes) for loc, indexes in by_location.items()}
        spec = layout(self.plan, spec, locations, cores, 1, self.full_range)
        work, dest = self._assign(spec, locations, sorted(slots), by_location)
        items = {sender_key(i.stage_id, i.index): i for its in work.values() for i in its}
        run = _Run(
            run=spec.run,
            items=items,
            slot_items={
                slot: [sender_key(i.stage_id, i.index) for i in its] for slot, its in work.items()
            },
            dest=dest,
            locations={index: slots[index].location for index in work},
            ready={index: slots[index].conn for index in work},
            pending={},
            delivered={},
            done=set(),
        )
        with self._lock:
            self._current = run
        from pyspark import cloudpickle  # the spec holds the job's functions, as a closure

        spec_bytes = cloudpickle.dumps(spec, 5)  # once per run: the same for every task
        ordered: dict[int, int] = {}  # slot -> the connection its order went to
        for index, its in work.items():
            ordered[index] = slots[index].conn
            try:
                order = encode_order(spec_bytes, pickle.dumps(its, 5))
                slots[index].link.send(ORDER, spec.run, 0, 0, 0, order)
            except LinkClosed:
                pass  # its connection reports the loss: its groups run again
        return self._gather(spec, spec_bytes, run, ordered, launch, watch)

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
        self,
        spec: EpochSpec,
        spec_bytes: bytes,
        run: _Run,
        ordered: dict[int, int],
        launch: int,
        watch: set[str],
    ) -> list[TaskReport]:
        """Collect the groups' reports; a lost task's unfinished groups are ordered again
        from its next attempt, once it reconnects."""
        reports: list[TaskReport] = []
        undone = set(run.items)
        errors: dict[int, str] = {}  # connection -> the error its task sent
        ends: dict[int, int] = {}  # slot -> how often its Spark job ended in this run
        waiting: dict[int, float] = {}  # slot -> when its return is given up
        while undone:
            try:
                event_launch, kind, index, conn, value = self._events.get(timeout=_WATCH_INTERVAL_S)
            except queue.Empty:
                gone = sorted(watch - set(self.cluster.executor_ids())) if watch else []
                if gone:
                    self._teardown()
                    raise ExecutorsLost(gone) from None
                late = [slot for slot, deadline in waiting.items() if time.monotonic() > deadline]
                if late:
                    self._lost(
                        spec, f"the task of slot {late[0]} did not come back after a failure"
                    )
                continue
            if event_launch != launch:
                continue  # an earlier launch's
            if kind == "frame" and value.kind == REPORTS:
                if value.payload:
                    reports.extend(pickle.loads(value.payload))
                undone.discard(sender_key(value.a, value.b))
            elif kind == "frame" and value.kind == FAILED:
                errors[conn] = value.payload.decode(errors="replace")
            elif kind == "lost" and ordered.get(index) == conn:
                del ordered[index]
                lost = [key for key in run.slot_items.get(index, ()) if key in undone]
                if lost:
                    detail = errors.get(conn) or (
                        f"{_WORKER_CRASHED}: the task of slot {index} disconnected ({value})"
                    )
                    self._group_lost(spec, lost, detail)
                    waiting[index] = time.monotonic() + _REGISTER_TIMEOUT_S
            elif kind == "joined" and index in waiting:
                del waiting[index]
                self._order_again(spec, spec_bytes, run, index, conn, undone)
                ordered[index] = conn
            elif kind == "ended" and self._slot_jobs.get(index) is value[0]:
                # The slot's Spark job gave up its task (Spark's attempts used up): a new
                # job for the slot, while its groups' failures stay within the limit.
                ends[index] = ends.get(index, 0) + 1
                if ends[index] > self._max_failures:
                    self._lost(spec, f"the Spark job of slot {index} ended: {value[1]}")
                self._submit(spec.job, index)
        with self._lock:
            self._current = None
        return reports

    def _group_lost(self, spec: EpochSpec, keys: list[int], detail: str) -> None:
        """Count a failure of each of a lost task's unfinished groups; fail the epoch once
        one of them failed ``spark.task.maxFailures`` times (as Spark gives up a task)."""
        epoch, counts = self._group_failures
        if epoch != spec.epoch:
            counts = {}
            self._group_failures = (spec.epoch, counts)
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        worst = max(counts[key] for key in keys)
        if worst >= self._max_failures:
            self._teardown()
            raise EpochTaskFailed(
                f"A long-running task failed {worst} times in epoch {spec.epoch}: {detail}"
            )
        _LOG.warning(
            "Epoch %d run %d: a long-running task failed (%s); its %d unfinished group(s) run "
            "again in its next attempt",
            spec.epoch,
            spec.run,
            detail.strip().splitlines()[-1][:300],
            len(keys),
        )

    def _order_again(
        self,
        spec: EpochSpec,
        spec_bytes: bytes,
        run: _Run,
        index: int,
        conn: int,
        undone: set[int],
    ) -> None:
        """Order a returned task (connection ``conn``) the groups its lost attempt left
        unfinished, with the rows already relayed to them."""
        with self._lock:
            slot = self._slots.get(index)
            if slot is None or slot.conn != conn:
                return  # lost again: its "lost" event follows
            moved = slot.location != run.locations.get(index)
            if not moved:
                items = [run.items[k] for k in run.slot_items[index] if k in undone]
                rows = [
                    r for item in items for ex in item.inputs for r in run.delivered.get(ex, ())
                ]
                run.ready[index] = conn  # rows of groups finishing from now on go to it
        if moved:  # a keyed group's state is on its executor
            self._lost(spec, f"the task of slot {index} came back on another executor")
        try:
            order = encode_order(spec_bytes, pickle.dumps(items, 5))
            slot.link.send(ORDER, spec.run, 0, 0, 0, order)
            for row in rows:
                slot.link.forward(row)
        except LinkClosed:
            pass  # its connection reports the loss

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
