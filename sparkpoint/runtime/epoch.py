"""Turns one epoch of the plan into one Spark job and runs it.

Source stages read one split range per partition; keyed stages follow a
``repartitionById`` on the target subtask; union stages read the union of their inputs.
The rows of the final stages (sink committables, snapshot acks, watermarks, statistics) are
collected to the driver, which is all the driver ever receives.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from sparkpoint.runtime.graph import Plan
from sparkpoint.runtime.records import ROW_SCHEMA_DDL
from sparkpoint.runtime.task import EpochSpec, run_stage_task

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


def _stage_fn(spec: EpochSpec, stage: Any) -> Any:
    def run(batches: Any) -> Any:
        return run_stage_task(spec, stage, batches)

    return run


def run_epoch(spark: Any, plan: Plan, spec: EpochSpec) -> list[tuple[int, int, bytes]]:
    """Run the epoch; returns the collected ``(sub, kind, payload)`` rows."""
    dfs: dict[int, Any] = {}
    for st in plan.stages:
        fn = _stage_fn(spec, st)
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
    finals = [dfs[i] for i in sorted(spec.final_stage_ids)]
    out = reduce(lambda a, b: a.union(b), finals)
    return [(r[0], r[1], bytes(r[2])) for r in out.collect()]
