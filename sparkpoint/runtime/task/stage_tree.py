"""The operator tree one task runs: chained operators, the sink writers and the routers
that send the stage's outputs to the consumers' subtasks (``router``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sparkpoint.runtime.graph import Node, NodeKind, Stage
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
from sparkpoint.runtime.operators.two_input import CoOperator, KeyedCoProcessOperator
from sparkpoint.runtime.operators.type_crossing import TypedSourceOperator, crossing_converter
from sparkpoint.runtime.operators.window_operator import WindowOperator
from sparkpoint.runtime.protocol import SinkOutput, StageRoutes
from sparkpoint.runtime.task.router import Router

__all__ = [
    "OPERATOR_FACTORIES",
    "OperatorFactory",
    "SinkOperator",
    "StageTree",
    "TreeBuild",
    "build_tree",
]


class SinkOperator(Operator):
    """Feeds a sink writer; what it staged goes to the driver in the task's report."""

    def __init__(self, node: Node, outputs: list[SinkOutput]) -> None:
        super().__init__(node.operator_id, node.name)
        self.sink = node.sink
        self.outputs = outputs
        self.writer: Any = None
        self._preparing: _InThread | None = None

    def open(self, env: OperatorEnv) -> None:
        self.env = env
        self.writer = self.sink.create_writer(
            env.job_id, env.epoch, env.subtask_index, env.parallelism, env.attempt_number
        )

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        self.writer.write(values)

    def end_epoch(self) -> None:
        if self.writer.prepare_in_background:
            self._preparing = _InThread(self.writer.prepare_commit)
        else:
            self._staged(self.writer.prepare_commit())

    def finish_epoch(self) -> None:
        """Wait for a ``prepare_commit`` that ``end_epoch`` left running in a thread (its
        error raised here), and hand on what it staged."""
        preparing, self._preparing = self._preparing, None
        if preparing is not None:
            self._staged(preparing.result())

    def _staged(self, committables: list[Any]) -> None:
        if committables:
            self.outputs.append(
                SinkOutput(
                    self.operator_id,
                    self.env.subtask_index,
                    tuple(committables),
                    bool(self.sink.transactional),
                )
            )


class _InThread:
    """A call running in a daemon thread; ``result()`` waits for it and returns its value
    or raises its exception."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sparkpoint-sink-prepare")
        self._thread.daemon = True
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # handed to the task's thread in ``result``
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


@dataclass(frozen=True)
class TreeBuild:
    """What operator factories need besides the node: the job's execution mode and where
    sink writers put what they staged."""

    batch_mode: bool
    sink_outputs: list[SinkOutput]


# Makes the operator that runs a node of one kind.
OperatorFactory = Callable[[Node, TreeBuild], Operator]


def _key_selector(node: Node, side: int = 0) -> Any:
    """The key selector of the ``key_by`` in front of input ``side``."""
    return node.inputs[side].key_selector


def _map(node: Node, build: TreeBuild) -> Operator:
    return MapOperator(node.operator_id, node.name, node.function)


def _flat_map(node: Node, build: TreeBuild) -> Operator:
    return FlatMapOperator(node.operator_id, node.name, node.function)


def _filter(node: Node, build: TreeBuild) -> Operator:
    return FilterOperator(node.operator_id, node.name, node.function)


def _process(node: Node, build: TreeBuild) -> Operator:
    return ProcessOperator(node.operator_id, node.name, node.function)


def _timestamps(node: Node, build: TreeBuild) -> Operator:
    return TimestampsOperator(node.operator_id, node.name, node.watermark_strategy)


def _source(node: Node, build: TreeBuild) -> Operator:
    """A source passes its records on: converted to its declared type if it has one, and
    stamped if it carries a watermark strategy (only under IngestionTime,
    ``StreamExecutionEnvironment``), its records converted before they are stamped."""
    convert = crossing_converter(node.output_type)
    if node.watermark_strategy is not None:
        return TimestampsOperator(node.operator_id, node.name, node.watermark_strategy, convert)
    if convert is not None:
        return TypedSourceOperator(node.operator_id, node.name, convert)
    return Operator(node.operator_id, node.name)


def _keyed_process(node: Node, build: TreeBuild) -> Operator:
    return KeyedProcessOperator(
        node.operator_id, node.name, node.function, _key_selector(node), node.element_call
    )


def _reduce(node: Node, build: TreeBuild) -> Operator:
    return ReduceOperator(
        node.operator_id, node.name, node.function, _key_selector(node), build.batch_mode
    )


def _window(node: Node, build: TreeBuild) -> Operator:
    assert node.window is not None
    return WindowOperator(node.operator_id, node.name, node.window, _key_selector(node))


def _co_operator(node: Node, build: TreeBuild) -> Operator:
    return CoOperator(node.operator_id, node.name, node.function, node.kind)


def _keyed_co_process(node: Node, build: TreeBuild) -> Operator:
    selectors = (_key_selector(node, 0), _key_selector(node, 1))
    return KeyedCoProcessOperator(
        node.operator_id, node.name, node.function, selectors, node.co_kind or node.kind
    )


def _broadcast_process(node: Node, build: TreeBuild) -> Operator:
    return BroadcastProcessOperator(
        node.operator_id, node.name, node.function, node.broadcast_descriptors
    )


def _keyed_broadcast_process(node: Node, build: TreeBuild) -> Operator:
    return KeyedBroadcastProcessOperator(
        node.operator_id,
        node.name,
        node.function,
        _key_selector(node),
        node.broadcast_descriptors,
    )


def _async_wait(node: Node, build: TreeBuild) -> Operator:
    assert node.async_settings is not None
    return AsyncWaitOperator(node.operator_id, node.name, node.function, node.async_settings)


def _sink(node: Node, build: TreeBuild) -> Operator:
    return SinkOperator(node, build.sink_outputs)


def _pass_through(node: Node, build: TreeBuild) -> Operator:
    return Operator(node.operator_id, node.name)


# One factory per kind of node; key_by, union, partition and side_output pass records through
# (a side output's records reach it from its input operator's side children).
OPERATOR_FACTORIES: Mapping[NodeKind, OperatorFactory] = MappingProxyType(
    {
        NodeKind.SOURCE: _source,
        NodeKind.MAP: _map,
        NodeKind.FLAT_MAP: _flat_map,
        NodeKind.FILTER: _filter,
        NodeKind.PROCESS: _process,
        NodeKind.TIMESTAMPS: _timestamps,
        NodeKind.KEY_BY: _pass_through,
        NodeKind.KEYED_PROCESS: _keyed_process,
        NodeKind.REDUCE: _reduce,
        NodeKind.WINDOW: _window,
        NodeKind.UNION: _pass_through,
        NodeKind.PARTITION: _pass_through,
        NodeKind.SIDE_OUTPUT: _pass_through,
        NodeKind.ASYNC_WAIT: _async_wait,
        NodeKind.CO_MAP: _co_operator,
        NodeKind.CO_FLAT_MAP: _co_operator,
        NodeKind.CO_PROCESS: _co_operator,
        NodeKind.KEYED_CO_PROCESS: _keyed_co_process,
        NodeKind.BROADCAST_PROCESS: _broadcast_process,
        NodeKind.KEYED_BROADCAST_PROCESS: _keyed_broadcast_process,
        NodeKind.SINK: _sink,
    }
)


def _nothing() -> None:
    return None


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
        # Called after every batch pushed through (the task folds its metrics there).
        self.after_batch: Callable[[], None] = _nothing

    def push_input(
        self, input_index: int, values: list[Any], timestamps: list[int | None] | None
    ) -> None:
        """Records of input edge ``input_index`` (``-1``: the stage's source)."""
        n = len(values)
        for op, side in self.entries[input_index]:
            op.records_in += n
            op.push_input(side, values, timestamps)
        self.after_batch()

    def operators(self) -> list[Operator]:
        """Every operator of the tree (routers left out), each once, parents first."""
        seen: dict[int, Operator] = {}
        todo = list(self.roots)
        while todo:
            op = todo.pop(0)
            if id(op) in seen or isinstance(op, Router):
                continue
            seen[id(op)] = op
            todo.extend(op.all_children())
        return list(seen.values())

    def finish_sinks(self) -> None:
        """Wait for the sinks' commit preparations still running (``SinkOperator``)."""
        errors = []
        for op in self.operators():
            if isinstance(op, SinkOperator):
                try:
                    op.finish_epoch()
                except Exception as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]


def build_tree(
    stage: Stage,
    batch_mode: bool,
    routes: StageRoutes | None,
    out: list[tuple[int, int, Any]],
    sink_outputs: list[SinkOutput],
) -> StageTree:
    """The stage's operators wired into trees, with a router behind every exit."""
    build = TreeBuild(batch_mode, sink_outputs)
    ops = {node: OPERATOR_FACTORIES[node.kind](node, build) for node in stage.members}
    roots = set(stage.roots)
    for node in stage.members:
        if node in roots:
            continue
        src = node.inputs[0]  # a chained node has one input: a node of this stage, or a
        while src.kind.virtual:  # forward partitioning in front of one
            src = src.inputs[0]
        if node.kind is NodeKind.SIDE_OUTPUT:
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
        if all(root.kind.broadcast and side == 0 for root, side in edge.targets)
    )
    return StageTree([ops[r] for r in stage.roots], entries, deferred)
