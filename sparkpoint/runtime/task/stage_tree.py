"""The operator tree one task runs: chained operators, the sink writers and the routers
that send the stage's outputs to the consumers' subtasks (``router``)."""

from __future__ import annotations

from typing import Any

from sparkpoint.runtime.graph import BROADCAST, VIRTUAL, Node, Stage
from sparkpoint.runtime.operators.async_wait import AsyncWaitOperator
from sparkpoint.runtime.operators.broadcast_operator import (
    BroadcastProcessOperator,
    KeyedBroadcastProcessOperator,
)
from sparkpoint.runtime.operators.chain import (
    FilterOperator,
    FlatMapOperator,
    KeyedProcessOperator,
    MapOperator,
    Operator,
    ProcessOperator,
    ReduceOperator,
    TimestampsOperator,
)
from sparkpoint.runtime.operators.context import OperatorEnv
from sparkpoint.runtime.operators.two_input import CALLS, CoOperator, KeyedCoProcessOperator
from sparkpoint.runtime.operators.type_crossing import TypedSourceOperator, crossing_converter
from sparkpoint.runtime.operators.window_operator import WindowOperator
from sparkpoint.runtime.protocol import SinkOutput, StageRoutes
from sparkpoint.runtime.task.router import Router

__all__ = ["SinkOperator", "StageTree", "build_tree"]


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
                SinkOutput(
                    self.operator_id,
                    self.env.subtask_index,
                    tuple(committables),
                    bool(self.sink.transactional),
                )
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
        # A source carries a strategy only under IngestionTime (StreamExecutionEnvironment);
        # a typed source's records are converted before they are stamped.
        convert = crossing_converter(node.output_type) if k == "source" else None
        return TimestampsOperator(oid, name, node.watermark_strategy, convert)
    if k == "keyed_process":
        return KeyedProcessOperator(
            oid, name, node.function, node.inputs[0].key_selector, node.call
        )
    if k == "reduce":
        return ReduceOperator(oid, name, node.function, node.inputs[0].key_selector, batch_mode)
    if k == "broadcast_process":
        return BroadcastProcessOperator(oid, name, node.function, node.broadcast_descriptors)
    if k == "keyed_broadcast_process":
        return KeyedBroadcastProcessOperator(
            oid, name, node.function, node.inputs[0].key_selector, node.broadcast_descriptors
        )
    if k == "keyed_co_process":
        selectors = (node.inputs[0].key_selector, node.inputs[1].key_selector)
        return KeyedCoProcessOperator(oid, name, node.function, selectors, node.call or k)
    if k in CALLS:
        return CoOperator(oid, name, node.function, k)
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


class StageTree:
    """The operators of one stage's task: ``roots`` (opened, ended and closed by the task)
    and ``entries``: per input edge, the roots (and their input side) its records feed.
    ``deferred``: the input edges whose records the task pushes only after all others of
    the epoch (the non-broadcast input of a broadcast operator, so the epoch's broadcast
    records come first)."""

    def __init__(
        self,
        roots: list[Operator],
        entries: dict[int, list[tuple[Operator, int]]],
        deferred: frozenset[int] = frozenset(),
    ):
        self.roots = roots
        self.entries = entries
        self.deferred = deferred

    def push_input(
        self, input_index: int, values: list[Any], timestamps: list[int | None] | None
    ) -> None:
        """Records of input edge ``input_index`` (``-1``: the stage's source)."""
        for op, side in self.entries[input_index]:
            op.push_input(side, values, timestamps)


def build_tree(
    stage: Stage,
    batch_mode: bool,
    routes: StageRoutes | None,
    out: list[tuple[int, int, Any]],
    sink_outputs: list[SinkOutput],
) -> StageTree:
    """The stage's operators wired into trees, with a router behind every exit."""
    ops: dict[Node, Operator] = {}
    for node in stage.members:
        ops[node] = _build_operator(node, batch_mode, sink_outputs)
    roots = set(stage.roots)
    for node in stage.members:
        if node in roots:
            continue
        src = node.inputs[0]  # a chained node has one input: a node of this stage, or a
        while src.kind in VIRTUAL:  # forward partitioning in front of one
            src = src.inputs[0]
        if node.kind == "side_output":
            assert node.tag_id is not None
            ops[src].side_children.setdefault(node.tag_id, []).append(ops[node])
        else:
            ops[src].children.append(ops[node])
    if routes is not None:
        for route in routes.outputs:
            exit_node = stage.members[route.exit_index]
            ops[exit_node].children.append(Router(route, out, exit_node.output_type))
    entries: dict[int, list[tuple[Operator, int]]] = {}
    if stage.source is not None:
        entries[-1] = [(ops[stage.source], 0)]
    for edge in stage.inputs:
        entries[edge.index] = [(ops[root], side) for root, side in edge.targets]
    deferred = frozenset(
        edge.index
        for edge in stage.inputs
        if all(root.kind in BROADCAST and side == 0 for root, side in edge.targets)
    )
    return StageTree([ops[r] for r in stage.roots], entries, deferred)
