"""Turns one epoch of the plan into one Spark job and runs it.

Source stages read one split range per partition; keyed stages follow a
``repartitionById`` on the target subtask; union stages read the union of their inputs.
The rows of the final stages (sink committables, snapshot acks, watermarks, statistics) are
collected to the driver, which is all the driver ever receives.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from functools import reduce
from typing import Any

import pyarrow as pa

from sparkpoint.runtime.graph import Plan, Stage
from sparkpoint.runtime.protocol import EpochSpec, TaskReport
from sparkpoint.runtime.records import KIND_REPORT, ROW_SCHEMA_DDL, iter_rows, rows_to_arrow
from sparkpoint.runtime.task import StageTask

__all__ = ["final_stage_ids", "routing", "run_epoch"]


def final_stage_ids(plan: Plan) -> frozenset[int]:
    """Stages whose output goes to the driver."""
    return frozenset(s.id for s in plan.stages if s.exit is None)


def routing(plan: Plan) -> tuple[dict[int, int], dict[int, Any]]:
    """Per stage: the parallelism of the stage it feeds, and its key router if keyed."""
    next_p: dict[int, int] = {}
    router: dict[int, Any] = {}
    for st in plan.stages:
        for up in st.inputs:
            if st.key_selector is not None:
                next_p[up.id] = st.parallelism
                router[up.id] = (st.key_selector, st.parallelism, st.max_parallelism)
            else:
                next_p[up.id] = 1
    return next_p, router


def run_stage_task(
    spec: EpochSpec,
    stage: Stage,
    batches: Iterator[pa.RecordBatch],
    offset: int = 0,
    num_partitions: int = 0,
) -> Iterator[pa.RecordBatch]:
    """Entry point inside ``mapInArrow``: find our partition and attempt, then run."""
    import os

    from pyspark import TaskContext

    from sparkpoint.runtime.executor import current_executor

    if spec.job.fs_options:
        from sparkpoint.fs.registry import configure, get_options

        if dict(get_options()) != dict(spec.job.fs_options):
            configure(dict(spec.job.fs_options))
    tc = TaskContext.get()
    partition = tc.partitionId() - offset if tc is not None else 0
    attempt = tc.attemptNumber() if tc is not None else 0
    root = spec.job.local_state_dir or os.path.join(tempfile.gettempdir(), "sparkpoint-state")
    task = StageTask(spec, stage, partition, attempt, current_executor(), root, num_partitions)
    if stage.source is not None:
        for _ in batches:  # the split index row: drain it so Spark can reuse the worker
            pass
        batches = iter(())
    out = task.run(iter_rows(batches))
    for i in range(0, len(out), 256):
        yield rows_to_arrow(out[i : i + 256])


def _stage_fn(spec: EpochSpec, stage: Any, offset: int, count: int) -> Any:
    def run(batches: Any) -> Any:
        return run_stage_task(spec, stage, batches, offset, count)

    return run


def partition_offsets(plan: Plan, spec: EpochSpec) -> tuple[dict[int, int], dict[int, int]]:
    """Per stage, how far a narrow union shifts its tasks' ``TaskContext.partitionId()``.

    A stage's ``mapInArrow`` is pipelined into the Spark task of the RDD that ends its
    pipeline: a shuffle (a keyed consumer), a union stage, or the union of the final stages.
    In a union, the partitions of an input come after those of the inputs before it.
    """
    counts: dict[int, int] = {}
    for st in plan.stages:
        if st.source is not None:
            counts[st.id] = max(1, len(spec.source_ranges.get(st.id, [])))
        elif st.key_selector is not None:
            counts[st.id] = st.parallelism
        else:
            counts[st.id] = sum(counts[i.id] for i in st.inputs)
    offsets: dict[int, int] = {}
    pos = 0
    for sid in sorted(spec.job.final_stage_ids):
        offsets[sid] = pos
        pos += counts[sid]
    for st in reversed(plan.stages):  # consumers before their inputs
        pos = offsets.get(st.id, 0)
        for inp in st.inputs:
            if st.key_selector is not None:
                offsets[inp.id] = 0  # a shuffle ends the input's pipeline
            else:
                offsets[inp.id] = pos
                pos += counts[inp.id]
    return offsets, counts


def run_epoch(spark: Any, plan: Plan, spec: EpochSpec) -> list[TaskReport]:
    """Run the epoch; returns the report of every task."""
    dfs: dict[int, Any] = {}
    offsets, counts = partition_offsets(plan, spec)
    for st in plan.stages:
        fn = _stage_fn(spec, st, offsets[st.id], counts[st.id])
        if st.source is not None:
            n = max(1, len(spec.source_ranges.get(st.id, [])))
            df = spark.range(0, n, 1, n).mapInArrow(fn, ROW_SCHEMA_DDL)
        elif st.key_selector is not None:
            up = dfs[st.inputs[0].id]
            df = up.repartitionById(st.parallelism, "sub").mapInArrow(fn, ROW_SCHEMA_DDL)
        else:
            up = reduce(lambda a, b: a.union(b), [dfs[i.id] for i in st.inputs])
            df = up.mapInArrow(fn, ROW_SCHEMA_DDL)
        dfs[st.id] = df
    finals = [dfs[i] for i in sorted(spec.job.final_stage_ids)]
    out = reduce(lambda a, b: a.union(b), finals)
    return [pickle.loads(bytes(r[2])) for r in out.collect() if r[1] == KIND_REPORT]
