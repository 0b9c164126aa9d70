"""Turns one run of an epoch into one Spark job of RDDs, and runs it.

- Every stage runs as task groups (``task_groups``): each Spark task runs one or more of
  the stage's subtasks, one after the other; at most ``tasks_per_core`` tasks per core
  (one per core for a source stage of sparse input).
- A source stage reads its split ranges in the partitions of an RDD of empty elements,
  one partition per task group.
- Every exchange (``graph.Exchange``) is one shuffle (``partitionBy``) of the union of its
  upstream stages' rows, with one partition per consumer task group; each consumer reads
  its own partitions of it (``PartitionPruningRDD``), so an upstream feeding several
  consumers runs once.
- A keyed stage's partitions are zipped behind a pinned RDD whose partition ``i`` prefers
  the executor that holds the state of task group ``i``'s subtasks (a group holds only
  subtasks of one executor), so the scheduler runs every subtask where its state is
  (delay scheduling waits up to ``spark.locality.wait.process`` for that executor). Every
  upstream task sends exactly one item to every partition, so a group's input has as many
  items as the exchange's upstream stages have tasks, and the pinned partition holds that
  many empty elements (``zip`` requires equal counts).

Rows are ``(channel, kind, payload)`` (``records``); a task group splits its input by
channel, one list per subtask. The rows of the final stages are collected: the driver
receives only the subtasks' reports.
"""

from __future__ import annotations

import pickle
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from sparkpoint.errors import SparkpointError
from sparkpoint.runtime.graph import Plan, Stage
from sparkpoint.runtime.protocol import (
    EpochSpec,
    JobSpec,
    OutputRoute,
    StageRoutes,
    TaskReport,
)
from sparkpoint.runtime.spark.cluster import SparkCluster
from sparkpoint.runtime.spark.resource_profiles import stage_profiles
from sparkpoint.runtime.spark.task_groups import channel_partitions, group_subtasks
from sparkpoint.runtime.task.records import KIND_REPORT
from sparkpoint.runtime.task.task_group import route_rows, run_group
from sparkpoint.state.backend import SnapshotType

__all__ = [
    "EpochRunner",
    "ExecutorsLost",
    "epoch_description",
    "final_stage_ids",
    "job_group",
    "layout",
    "routing",
    "sparse_source",
]

_WATCH_INTERVAL_S = 0.25


class ExecutorsLost(SparkpointError):
    """Executors that held keyed subtasks left while an epoch ran; the run was cancelled
    (the epoch runs again with those subtasks placed elsewhere)."""

    def __init__(self, executors: list[str]) -> None:
        super().__init__(f"Executors {', '.join(executors)} were lost during the epoch")
        self.executors = executors


def final_stage_ids(plan: Plan) -> frozenset[int]:
    """Stages whose output goes to the driver."""
    return frozenset(s.id for s in plan.stages if not s.outputs)


def routing(plan: Plan) -> dict[int, StageRoutes]:
    """Per stage with outputs: its exchange's size, its output edges, where its watermarks
    and reports go (read at job start and after a restore, which may adopt another max
    parallelism)."""
    routes: dict[int, StageRoutes] = {}
    for st in plan.stages:
        if not st.outputs:
            continue
        assert st.out_exchange is not None
        ex = plan.exchanges[st.out_exchange]
        outputs = tuple(
            OutputRoute(
                st.members.index(e.exit),
                e.index,
                e.partitioning,
                e.down.channel_offset,
                e.down.parallelism,
                e.down.max_parallelism,
            )
            for e in st.outputs
        )
        consumers = {e.down.id: e.down for e in st.outputs}
        meta = tuple(
            sorted(c.channel_offset + i for c in consumers.values() for i in range(c.parallelism))
        )
        first = st.outputs[0].down
        routes[st.id] = StageRoutes(
            ex.channels, outputs, meta, first.channel_offset, first.parallelism
        )
    return routes


def job_group(job_id: str) -> str:
    """The Spark job group of every Spark job the sparkpoint job ``job_id`` runs."""
    return f"sparkpoint-{job_id}"


def epoch_description(spec: EpochSpec) -> str:
    """``sparkpoint <job name> epoch N [checkpoint M]``: the Spark description of an epoch's
    jobs (a savepoint is named as one)."""
    text = f"sparkpoint {spec.job.job_name} epoch {spec.epoch}"
    request = spec.checkpoint
    if request is not None:
        kind = "savepoint" if request.snapshot_type == SnapshotType.SAVEPOINT else "checkpoint"
        text += f" {kind} {request.checkpoint_id}"
    return text


def stage_partitions(plan: Plan, spec: EpochSpec) -> dict[int, int]:
    """How many tasks each stage runs this epoch."""
    counts: dict[int, int] = {}
    for st in plan.stages:
        if st.source is not None:
            counts[st.id] = max(1, len(spec.source_ranges.get(st.id, [])))
        else:
            counts[st.id] = st.parallelism
    return counts


def subtask_of(key: int) -> int:
    """``partitionBy``'s partition function: rows already name their channel."""
    return key


def _keyed_input(frames: Iterator[bytes]) -> Iterator[tuple[int, int, Any]]:
    """Rows of a pinned keyed partition: frames alternate between the pinned RDD's empty
    element and one pickled shuffle batch ``[(channel, rows)]``."""
    for i, frame in enumerate(frames):
        if i % 2:
            for _sub, rows in pickle.loads(frame):
                yield from rows


def _shuffled_input(frames: Iterator[bytes]) -> Iterator[tuple[int, int, Any]]:
    """Rows of an unpinned partition: every frame is a pickled shuffle batch."""
    for frame in frames:
        for _sub, rows in pickle.loads(frame):
            yield from rows


def _packed_input(frames: Iterator[bytes], pinned: bool) -> Iterator[tuple[int, int, Any]]:
    """Rows of a partition that reads several exchanges: one frame per exchange (after the
    pinned RDD's empty element, when pinned), each a pickled batch holding that exchange's
    shuffle batches of the partition (``glom``)."""
    for i, frame in enumerate(frames):
        if pinned and i == 0:
            continue
        for batches in pickle.loads(frame):
            for batch in batches:
                for _sub, rows in pickle.loads(batch):
                    yield from rows


def run_task(
    spec: EpochSpec, stage: Stage, partition: int, items: Iterator[Any], num_partitions: int
) -> Iterator[Any]:
    """The body of every Spark task: run the subtasks of task group ``partition`` of the
    stage one after the other, then emit their rows, one item per shuffle partition of the
    next exchange (every partition gets exactly one, so pinned consumers can zip)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    attempt = tc.attemptNumber() if tc is not None else 0
    groups = spec.task_groups.get(stage.id)
    group = groups[partition] if groups is not None else (partition,)
    rows: Iterator[tuple[int, int, Any]] | None
    if stage.source is not None:
        for _ in items:  # the empty element: drain it so Spark can reuse the worker
            pass
        rows = None
    elif len(stage.exchanges) > 1:
        rows = _packed_input(items, stage.keyed)
    elif stage.keyed:
        rows = _keyed_input(items)
    else:
        rows = _shuffled_input(items)
    out = run_group(spec, stage, group, rows, attempt, num_partitions)
    by_partition = route_rows(spec, stage, out)
    if by_partition is None:
        return iter(out)
    return iter(list(enumerate(by_partition)))


def _stage_fn(spec: EpochSpec, stage: Stage, num_partitions: int) -> Any:
    def run(partition: int, items: Iterator[Any]) -> Iterator[Any]:
        return run_task(spec, stage, partition, items, num_partitions)

    return run


def sparse_source(spec: EpochSpec, stage: Stage, full_range: int | None) -> bool:
    """Whether a source stage reads little this epoch: every range counts its records and
    all of them together hold fewer than one full range (``full_range`` records:
    ``sparkpoint.epoch.max-records-per-split``). Such a stage runs one Spark task per core:
    each task's fixed cost (launch, the closure, the Python worker's hand-over) is then paid
    once per core, and a second wave of tasks does not wait for the first. A larger epoch
    keeps ``tasks_per_core`` (its tasks' work, not their fixed cost, decides its time)."""
    if full_range is None or stage.source is None:
        return False
    ranges = spec.source_ranges.get(stage.id, [])
    counted = [r.records for r in ranges if r.records is not None]
    return len(counted) == len(ranges) and sum(counted) < full_range


def layout(
    plan: Plan,
    spec: EpochSpec,
    locations: Mapping[int, list[str]],
    cores: Mapping[str, int],
    tasks_per_core: int,
    full_range: int | None = None,
) -> EpochSpec:
    """``spec`` with the run's task groups (``task_groups``): every stage's groups, and
    the shuffle partition of every channel of every exchange. A source stage of sparse
    input (``sparse_source``) runs one task per core."""
    counts = stage_partitions(plan, spec)
    groups = {
        st.id: group_subtasks(
            counts[st.id],
            locations.get(st.id) if st.keyed else None,
            cores,
            1 if sparse_source(spec, st, full_range) else tasks_per_core,
        ).groups
        for st in plan.stages
    }
    tables: dict[int, tuple[int, ...]] = {}
    for ex in plan.exchanges:
        table, _first = channel_partitions(
            [(c.channel_offset, groups[c.id]) for c in ex.consumers], ex.channels
        )
        for up in ex.ups:
            tables[up.id] = table
    return replace(spec, task_groups=groups, shuffle_partitions=tables)


class EpochRunner:
    """Runs the epochs of one job on Spark (keeps the pinned RDDs between epochs)."""

    long_running = False  # each epoch is a Spark job (the epoch pacer asks)

    def __init__(
        self, spark: Any, plan: Plan, tasks_per_core: int = 2, full_range: int | None = None
    ) -> None:
        self.plan = plan
        self.cluster = SparkCluster(spark)
        self.tasks_per_core = tasks_per_core
        self.full_range = full_range  # records of a full source range (sparse_source)
        # Stage-level scheduling of the stages whose slot sharing groups have resources.
        self.profiles = self._profiles(plan)

    def _profiles(self, plan: Plan) -> dict[int, Any]:
        if not any(n.slot_resources for st in plan.stages for n in st.members):
            return {}
        cores = [s.cores for s in self.cluster.live_executors().values()]
        return stage_profiles(
            plan.stages, final_stage_ids(plan), self.cluster.sc, max(cores) if cores else None
        )

    def run(
        self, spec: EpochSpec, locations: Mapping[int, list[str]], watch: set[str]
    ) -> list[TaskReport]:
        """Run the epoch with keyed stage ``s`` preferring ``locations[s]`` (one location
        per subtask); returns every subtask's report. Raises ``ExecutorsLost`` (after
        cancelling the run) when an executor in ``watch`` leaves before the run ends."""
        from pyspark import RDD
        from pyspark.serializers import NoOpSerializer

        sc = self.cluster.sc
        plan = self.plan
        cores = {s.location: s.cores for s in self.cluster.live_executors().values()}
        spec = layout(plan, spec, locations, cores, self.tasks_per_core, self.full_range)
        counts = stage_partitions(plan, spec)
        groups = spec.task_groups
        rdds: dict[int, Any] = {}
        shuffles: dict[int, Any] = {}
        firsts: dict[tuple[int, int], int] = {}  # (exchange, consumer) -> first partition

        def exchange(ex_id: int) -> Any:
            """The one shuffle of an exchange: its upstream stages' rows by partition."""
            if ex_id not in shuffles:
                ex = plan.exchanges[ex_id]
                ups = [build(u) for u in ex.ups]
                rows = ups[0] if len(ups) == 1 else sc.union(ups)
                base = 0
                for c in ex.consumers:
                    firsts[(ex_id, c.id)] = base
                    base += len(groups[c.id])
                shuffles[ex_id] = rows.partitionBy(base, subtask_of)
            return shuffles[ex_id]

        def own_partitions(st: Stage, ex_id: int) -> Any:
            """The JVM RDD of ``st``'s partitions of the shuffle of exchange ``ex_id``."""
            shuffled = exchange(ex_id)
            total = sum(len(groups[c.id]) for c in plan.exchanges[ex_id].consumers)
            return self.cluster.partitions_of(
                shuffled._jrdd, firsts[(ex_id, st.id)], len(groups[st.id]), total
            )

        def build(st: Stage) -> Any:
            if st.id in rdds:
                return rdds[st.id]
            fn = _stage_fn(spec, st, counts[st.id])
            tasks = len(groups[st.id])
            if st.source is not None:
                base: Any = RDD(self.cluster.base_rdd(tasks), sc, NoOpSerializer())
                rdd = base.mapPartitionsWithIndex(fn)
            else:
                if len(st.exchanges) == 1:
                    own = own_partitions(st, st.exchanges[0])
                    # every upstream task sends each partition one item
                    per_partition = sum(
                        len(groups[u.id]) for u in plan.exchanges[st.exchanges[0]].ups
                    )
                else:
                    # Several shuffles: each partition's items packed into one element per
                    # shuffle (``glom``), zipped (``_packed_input`` reads them).
                    packed = [
                        RDD(own_partitions(st, ex_id), sc, NoOpSerializer()).glom()._jrdd
                        for ex_id in st.exchanges
                    ]
                    own = packed[0]
                    for more in packed[1:]:
                        own = own.zip(more)
                    per_partition = 1
                if st.keyed:
                    subtask_locations = locations[st.id]
                    pinned = self.cluster.pinned_rdd(
                        [
                            subtask_locations[g[0]] if g[0] < len(subtask_locations) else ""
                            for g in groups[st.id]
                        ],
                        per_partition,
                    )
                    own = pinned.zip(own)
                rdd = RDD(own, sc, NoOpSerializer()).mapPartitionsWithIndex(fn)
            if st.id in self.profiles:
                rdd = rdd.withResources(self.profiles[st.id])
            rdds[st.id] = rdd
            return rdd

        for st in plan.stages:
            build(st)
        finals = [rdds[i] for i in sorted(spec.job.final_stage_ids)]
        out = finals[0] if len(finals) == 1 else sc.union(finals)
        rows = self._collect(out, spec, watch)
        return [payload for _sub, kind, payload in rows if kind == KIND_REPORT]

    def _collect(self, rdd: Any, spec: EpochSpec, watch: set[str]) -> list[Any]:
        group = f"sparkpoint-{spec.job.job_id}-{spec.run}-{uuid.uuid4().hex[:6]}"
        previous = self.cluster.tag_jobs(group)
        described = self.cluster.describe_jobs(job_group(spec.job.job_id), epoch_description(spec))
        lost: list[str] = []
        done = threading.Event()

        def watch_executors() -> None:
            while not done.wait(_WATCH_INTERVAL_S):
                gone = sorted(watch - set(self.cluster.executor_ids()))
                if gone:
                    lost.extend(gone)
                    self.cluster.cancel_tagged(group)
                    return

        watcher = threading.Thread(target=watch_executors, daemon=True, name=group)
        if watch:
            watcher.start()
        try:
            return list(rdd.collect())
        except Exception:
            if lost:
                raise ExecutorsLost(lost) from None
            raise
        finally:
            done.set()
            if watch:
                watcher.join()
            self.cluster.untag_jobs(group, previous)
            self.cluster.restore_description(described)

    def cleanup(
        self, job: JobSpec, executors: Mapping[str, str], aborted: frozenset[int] = frozenset()
    ) -> int:
        """Delete the job's local state on every executor in ``executors`` (id -> preferred
        location), one pinned task each, after stopping its snapshot uploads (deleting what
        uploads of the ``aborted`` checkpoints wrote); returns how many executors had some."""
        from pyspark import RDD
        from pyspark.serializers import NoOpSerializer

        if not executors:
            return 0
        app, override, job_id = job.application_id, job.local_state_dir, job.job_id

        def remove(_partition: int, items: Iterator[Any]) -> Iterator[int]:
            from sparkpoint.runtime.task.async_upload import end_job_uploads
            from sparkpoint.runtime.task.local_dirs import job_dir, remove_job

            for _ in items:
                pass
            end_job_uploads(job_dir(app, override, job_id, create=False), aborted)
            yield int(remove_job(app, override, job_id))

        pinned = self.cluster.pinned_rdd(list(executors.values()), 1)
        base: Any = RDD(pinned, self.cluster.sc, NoOpSerializer())
        rdd = base.mapPartitionsWithIndex(remove)
        described = self.cluster.describe_jobs(
            job_group(job.job_id), f"sparkpoint {job.job_name} local state cleanup"
        )
        try:
            return int(sum(rdd.collect()))
        finally:
            self.cluster.restore_description(described)
