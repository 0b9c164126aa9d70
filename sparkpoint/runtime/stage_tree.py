"""The operator tree one task runs: chained operators, the sink writers and the router
that sends the stage's output to the next stage's subtasks."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparkpoint.runtime.async_wait import AsyncWaitOperator
from sparkpoint.runtime.context import OperatorEnv
from sparkpoint.runtime.graph import Node, Stage
from sparkpoint.runtime.operators import (
    FilterOperator,
    FlatMapOperator,
    KeyedProcessOperator,
    MapOperator,
    Operator,
    ProcessOperator,
    ReduceOperator,
    TimestampsOperator,
)
from sparkpoint.runtime.protocol import SinkOutput
from sparkpoint.runtime.records import KIND_DATA, encode_data
from sparkpoint.runtime.type_crossing import TypedSourceOperator, crossing_converter
from sparkpoint.runtime.window_operator import WindowOperator
from sparkpoint.state.key_groups import assign_to_key_group, int64_key_groups

__all__ = ["GROUP_TARGET", "Router", "SinkOperator", "build_tree"]

GROUP_TARGET = 8192  # records per data row before it is flushed


class Router(Operator):
    """The exit of a stage: groups records by the next stage's subtask."""

    def __init__(
        self, router: Any, out: list[tuple[int, int, bytes]], output_type: Any = None
    ) -> None:
        super().__init__("router", "router")
        self.out = out
        # Records leaving the stage cross to another task: converted by their declared type.
        self.convert = crossing_converter(output_type)
        self.key_selector = router[0] if router else None
        self.parallelism = router[1] if router else 1
        self.max_parallelism = router[2] if router else 1
        self.groups: dict[int, tuple[list[Any], list[int | None] | None]] = {}
        self._cache: dict[Any, int] = {}

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        if self.convert is not None:
            values = self.convert(values)
        if self.key_selector is None:
            self._add(self.env.subtask_index % max(self.parallelism, 1), values, timestamps)
            return
        subs = self._subtasks([self.key_selector.get_key(v) for v in values])
        if self.parallelism == 1:
            self._add(0, values, timestamps)
            return
        by_sub: dict[int, list[int]] = {}
        for i, sub in enumerate(subs):
            by_sub.setdefault(sub, []).append(i)
        for sub, idx in by_sub.items():
            vs = [values[i] for i in idx]
            ts = None if timestamps is None else [timestamps[i] for i in idx]
            self._add(sub, vs, ts)

    def _subtasks(self, keys: list[Any]) -> list[int]:
        """The target subtask of each key: vectorised for int keys, memoised otherwise."""
        maxp, p = self.max_parallelism, self.parallelism
        kgs = int64_key_groups(keys, maxp)
        if kgs is not None:
            return ((kgs.astype(np.int64) * p) // maxp).tolist()  # type: ignore[no-any-return]
        cache = self._cache
        out = []
        for k in keys:
            try:
                ck = (k.__class__, k)
                sub = cache.get(ck)
                if sub is None:
                    sub = cache[ck] = assign_to_key_group(k, maxp) * p // maxp
            except TypeError:  # unhashable key: no memo
                sub = assign_to_key_group(k, maxp) * p // maxp
            out.append(sub)
        return out

    def _add(self, sub: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        group = self.groups.get(sub)
        if group is None:
            group = self.groups[sub] = ([], [] if timestamps is not None else None)
        gv, gt = group
        if gt is None and timestamps is not None:
            gt = [None] * len(gv)
            self.groups[sub] = (gv, gt)
        gv.extend(values)
        if gt is not None:
            gt.extend(timestamps if timestamps is not None else [None] * len(values))
        if len(gv) >= GROUP_TARGET:
            self._flush(sub)

    def _flush(self, sub: int) -> None:
        gv, gt = self.groups.pop(sub)
        if gv:
            self.out.append((sub, KIND_DATA, encode_data(gv, gt)))

    def end_epoch(self) -> None:
        for sub in list(self.groups):
            self._flush(sub)


class SinkOperator(Operator):
    """Feeds a sink writer; what it staged goes to the driver in the task's report."""

    def __init__(self, node: Node, outputs: list[SinkOutput]) -> None:
        super().__init__(node.operator_id, node.name)
        self.sink = node.sink
        self.outputs = outputs
        self.writer: Any = None

    def open(self, env: OperatorEnv) -> None:
        self.env = env
        self.writer = self.sink.create_writer(
            env.job_id, env.epoch, env.subtask_index, env.parallelism, env.attempt_number
        )

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        self.writer.write(values)

    def end_epoch(self) -> None:
        committables = self.writer.prepare_commit()
        if committables:
            self.outputs.append(
                SinkOutput(self.operator_id, self.env.subtask_index, tuple(committables),
                           bool(self.sink.transactional))
            )


def _build_operator(node: Node, batch_mode: bool, outputs: list[SinkOutput]) -> Operator:
    k = node.kind
    oid, name = node.operator_id, node.name
    if k == "map":
        return MapOperator(oid, name, node.function)
    if k == "flat_map":
        return FlatMapOperator(oid, name, node.function)
    if k == "filter":
        return FilterOperator(oid, name, node.function)
    if k == "process":
        return ProcessOperator(oid, name, node.function)
    if k == "timestamps" or (k == "source" and node.watermark_strategy is not None):
        # A source carries a strategy only under IngestionTime (StreamExecutionEnvironment).
        return TimestampsOperator(oid, name, node.watermark_strategy)
    if k == "keyed_process":
        return KeyedProcessOperator(
            oid, name, node.function, node.inputs[0].key_selector, node.call
        )
    if k == "reduce":
        return ReduceOperator(oid, name, node.function, node.inputs[0].key_selector, batch_mode)
    if k == "window":
        return WindowOperator(oid, name, node.function, node.inputs[0].key_selector)
    if k == "sink":
        return SinkOperator(node, outputs)
    if k == "async_wait":
        return AsyncWaitOperator(oid, name, node.function, node.call)
    if k == "source":
        convert = crossing_converter(node.output_type)
        if convert is not None:
            return TypedSourceOperator(oid, name, convert)
    # source, union, key_by and side_output pass records through
    return Operator(oid, name)


def build_tree(
    stage: Stage,
    batch_mode: bool,
    router: Any,
    out: list[tuple[int, int, bytes]],
    sink_outputs: list[SinkOutput],
) -> list[Operator]:
    """The stage's operators wired into trees; returns the roots (fed by the stage input).
    ``router`` is the next stage's ``(key selector, parallelism, max parallelism)``."""
    ops: dict[Node, Operator] = {}
    for node in stage.members:
        if node.kind == "key_by":
            continue
        ops[node] = _build_operator(node, batch_mode, sink_outputs)
    roots = set(stage.roots)
    for node in stage.members:
        if node not in ops or node in roots:
            continue
        for inp in node.inputs:
            src = inp.inputs[0] if inp.kind == "key_by" else inp
            if src not in ops:
                continue
            if node.kind == "side_output":
                assert node.tag_id is not None
                ops[src].side_children.setdefault(node.tag_id, []).append(ops[node])
            else:
                ops[src].children.append(ops[node])
    if stage.exit is not None:
        ops[stage.exit].children.append(Router(router, out, stage.exit.output_type))
    return [ops[r] for r in stage.roots]
