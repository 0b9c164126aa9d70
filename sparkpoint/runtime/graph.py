"""The logical dataflow (what the DataStream API builds) and its plan into Spark stages.

A stage is a tree of chained operators run by one Spark task per subtask. A node is chained
into the stage of its input when it has one input, is not keyed, no partitioning was asked
for in between and its parallelism is its input's; otherwise it starts a new stage fed by
**edges** (one per input stream) that say how records are partitioned (Flink's
``StreamPartitioner``s: hash by key group, forward, rebalance, rescale, shuffle, global,
broadcast, custom). ``key_by``, ``union`` and partitioning calls are virtual nodes: they
only shape the edges of their consumers. Two-input operators (``connect``) start a stage
with two edges; a broadcast operator's second edge is a ``broadcast`` one.

Every stage's output goes through one Spark shuffle, its **exchange**: the consumers that
read a set of upstream stages share one channel space (consumer ``D`` owns channels
``[offset, offset + parallelism)``), so an upstream stage that feeds several consumers is
computed once. Where one exchange would have to run before itself (a stream combined with a
result derived from it through another consumer of the same upstream), each upstream stage
of that group gets an exchange of its own over the same channel space, and a consumer reads
several exchanges.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkpoint.runtime.operators.async_wait import AsyncWaitSettings
    from sparkpoint.runtime.operators.window_operator import WindowSpec

__all__ = [
    "Edge",
    "ElementCall",
    "Exchange",
    "Node",
    "NodeKind",
    "Partitioning",
    "Plan",
    "Stage",
    "build_plan",
]


class NodeKind(StrEnum):
    """What a node of the dataflow does; its value is the ``type`` of the execution plan's
    JSON and the prefix of the operator id a node without a uid gets."""

    SOURCE = "source"
    MAP = "map"
    FLAT_MAP = "flat_map"
    FILTER = "filter"
    PROCESS = "process"
    TIMESTAMPS = "timestamps"
    KEY_BY = "key_by"
    KEYED_PROCESS = "keyed_process"
    REDUCE = "reduce"
    WINDOW = "window"
    UNION = "union"
    PARTITION = "partition"
    SIDE_OUTPUT = "side_output"
    ASYNC_WAIT = "async_wait"
    CO_MAP = "co_map"
    CO_FLAT_MAP = "co_flat_map"
    CO_PROCESS = "co_process"
    KEYED_CO_PROCESS = "keyed_co_process"
    BROADCAST_PROCESS = "broadcast_process"
    KEYED_BROADCAST_PROCESS = "keyed_broadcast_process"
    SINK = "sink"

    @property
    def keyed(self) -> bool:
        """Whether the operator holds keyed state (its input is a ``key_by``)."""
        return self in _KEYED

    @property
    def broadcast(self) -> bool:
        """Whether it is a broadcast operator: input 0 the (keyed or not) stream, input 1 the
        broadcast stream; it holds operator (broadcast) state."""
        return self in _BROADCAST

    @property
    def two_input(self) -> bool:
        """Whether the operator reads two streams (``connect``)."""
        return self in _TWO_INPUT

    @property
    def virtual(self) -> bool:
        """Whether the node only shapes its consumers' edges (no operator runs for it)."""
        return self in _VIRTUAL


_KEYED = frozenset(
    {
        NodeKind.KEYED_PROCESS,
        NodeKind.REDUCE,
        NodeKind.WINDOW,
        NodeKind.KEYED_CO_PROCESS,
        NodeKind.KEYED_BROADCAST_PROCESS,
    }
)
_BROADCAST = frozenset({NodeKind.BROADCAST_PROCESS, NodeKind.KEYED_BROADCAST_PROCESS})
_TWO_INPUT = frozenset(
    {NodeKind.CO_MAP, NodeKind.CO_FLAT_MAP, NodeKind.CO_PROCESS, NodeKind.KEYED_CO_PROCESS}
    | _BROADCAST
)
_VIRTUAL = frozenset({NodeKind.KEY_BY, NodeKind.UNION, NodeKind.PARTITION})

# How a keyed map/flat_map/filter calls its function: (function, value, context) -> outputs.
ElementCall = Callable[[Any, Any, Any], Iterable[Any] | None]

PARTITIONINGS = (
    "hash",
    "forward",
    "rebalance",
    "rescale",
    "shuffle",
    "global",
    "broadcast",
    "custom",
)


@dataclass(frozen=True)
class Partitioning:
    """How an edge distributes records over the consumer's subtasks."""

    kind: str
    key_selector: Any = None  # hash, custom
    partitioner: Any = None  # custom: the user's Partitioner (``partition(key, n)``)

    def __post_init__(self) -> None:
        if self.kind not in PARTITIONINGS:
            raise ValueError(
                f"Unknown partitioning {self.kind!r}; allowed: {', '.join(PARTITIONINGS)}"
            )

    @property
    def ship_strategy(self) -> str:
        """The name Flink's execution plan gives it."""
        return {"hash": "HASH", "custom": "CUSTOM"}.get(self.kind, self.kind.upper())


@dataclass(eq=False)
class Node:
    """One transformation of the dataflow: what it does (``kind``), what it reads
    (``inputs``) and what it needs to run; the fields a kind does not use stay empty."""

    id: int
    kind: NodeKind
    name: str
    inputs: list[Node] = field(default_factory=list)
    function: Any = None  # the user's function (map ... process, reduce, co_*, async_wait)
    key_selector: Any = None  # key_by
    source: Any = None  # source: a Source
    sink: Any = None  # sink: a Sink
    watermark_strategy: Any = None  # timestamps; a source under IngestionTime
    output_type: Any = None
    parallelism: int | None = None
    max_parallelism: int | None = None
    uid: str | None = None
    description: str | None = None  # set_description: shown in the execution plan
    # slot_sharing_group: the group's name and resource spec (its CPU cores become the
    # stage's task CPUs where Spark can: runtime/spark/resource_profiles.py)
    slot_sharing_group: str | None = None
    slot_resources: dict[str, Any] | None = None
    # keyed_process made by a keyed map/flat_map/filter: how it calls ``function`` (None:
    # ``process_element`` of a KeyedProcessFunction).
    element_call: ElementCall | None = None
    # keyed_co_process: the two-input kind whose function methods it calls (co_map,
    # co_flat_map or co_process), with one keyed state for both inputs.
    co_kind: NodeKind | None = None
    async_settings: AsyncWaitSettings | None = None  # async_wait: timeout, capacity, order
    window: WindowSpec | None = None  # window: assigner, trigger and window function
    tag_id: str | None = None  # side_output: the OutputTag id read from the input operator
    partitioning: Partitioning | None = None  # partition: what its consumers' edges use
    # broadcast_process, keyed_broadcast_process: the MapStateDescriptors of broadcast()
    broadcast_descriptors: tuple[Any, ...] = ()

    @property
    def operator_id(self) -> str:
        """Stable id of the operator: its uid, else derived from its position in the program."""
        return self.uid or f"{self.kind.value}-{self.id}"


@dataclass(eq=False)
class Edge:
    """Records of ``exit`` (a node of stage ``up``) flowing into stage ``down``."""

    up: Stage
    exit: Node
    down: Stage
    index: int  # position in ``down.inputs``
    partitioning: Partitioning
    targets: list[tuple[Node, int]]  # (root of ``down``, input side 0/1) fed by this edge


@dataclass(eq=False)
class Stage:
    """Operators run together in one Spark task per subtask."""

    id: int
    roots: list[Node]  # nodes fed by the stage input (a source, or the consumers of edges)
    parallelism: int  # 0 for a source stage: one task per split
    max_parallelism: int = 128
    source: Node | None = None
    members: list[Node] = field(default_factory=list)
    inputs: list[Edge] = field(default_factory=list)
    outputs: list[Edge] = field(default_factory=list)
    exchanges: list[int] = field(default_factory=list)  # the exchanges it reads
    out_exchange: int | None = None  # the exchange its output goes through
    channel_offset: int = 0  # its first channel in its exchanges' channel space

    @property
    def keyed_nodes(self) -> list[Node]:
        """The keyed operators of this stage (each has its own keyed state)."""
        return [n for n in self.members if n.kind.keyed]

    @property
    def operator_state_nodes(self) -> list[Node]:
        """The operators of this stage that hold operator (broadcast) state."""
        return [n for n in self.members if n.kind.broadcast]

    @property
    def keyed(self) -> bool:
        """Whether the stage holds keyed state (its subtasks are placed and pinned)."""
        return any(n.kind.keyed for n in self.members)


@dataclass(eq=False)
class Exchange:
    """One Spark shuffle: the outputs of ``ups`` to the channels of ``consumers``."""

    id: int
    ups: list[Stage]
    consumers: list[Stage]
    channels: int  # size of the channel space its consumers' channels lie in


@dataclass
class Plan:
    """Stages in execution (topological) order, and the exchanges between them."""

    stages: list[Stage]
    sources: list[Node]
    sinks: list[Node]
    nodes: list[Node]
    exchanges: list[Exchange] = field(default_factory=list)

    def to_json(self, default_parallelism: int = 1) -> str:
        """Flink-style execution plan JSON (``get_execution_plan``)."""
        stage_of = {n: s for s in self.stages for n in s.members}
        strategy: dict[tuple[Node, Node], str] = {}
        for st in self.stages:
            for e in st.inputs:
                for root, _side in e.targets:
                    strategy[(e.exit, root)] = e.partitioning.ship_strategy
        out = []
        for n in self.nodes:
            if n.kind.virtual:
                continue
            s = stage_of.get(n)
            entry: dict[str, Any] = {
                "id": n.id,
                "type": n.kind.value,
                "pact": _PACTS.get(n.kind, "Operator"),
                "contents": n.name,
                # Source stages run one task per split.
                "parallelism": (s.parallelism if s and s.parallelism else None)
                or n.parallelism
                or default_parallelism,
            }
            preds = [
                {
                    "id": producer.id,
                    "ship_strategy": strategy.get((producer, n), "FORWARD"),
                    "side": "second" if side else "first",
                }
                for side, inp in enumerate(n.inputs)
                for producer, _part in _resolve(inp, None)
            ]
            if n.description is not None:
                entry["description"] = n.description
            if n.slot_sharing_group is not None:
                entry["slot_sharing_group"] = n.slot_sharing_group
            if n.slot_resources:
                entry["resources"] = n.slot_resources
            if preds:
                entry["predecessors"] = preds
            out.append(entry)
        return json.dumps({"nodes": out}, indent=2)


_PACTS = {NodeKind.SOURCE: "Data Source", NodeKind.SINK: "Data Sink"}

# A producer of a consumer's input and the partitioning asked for in between (None: none).
Producer = tuple[Node, Partitioning | None]


def _resolve(node: Node, outer: Partitioning | None) -> list[Producer]:
    """The real producers behind ``node`` (through key_by, union and partitioning nodes) and
    the partitioning their records take; the partitioning nearest the consumer wins."""
    if node.kind is NodeKind.KEY_BY:
        part = outer or Partitioning("hash", key_selector=node.key_selector)
        return _resolve(node.inputs[0], part)
    if node.kind is NodeKind.PARTITION:
        return _resolve(node.inputs[0], outer or node.partitioning)
    if node.kind is NodeKind.UNION:
        out: list[Producer] = []
        for i in node.inputs:
            out.extend(_resolve(i, outer))
        return out
    return [(node, outer)]


def _key_input(node: Node, side: int = 0) -> Node:
    """The ``key_by`` node in front of a keyed operator."""
    src = node.inputs[side]
    if src.kind is not NodeKind.KEY_BY:
        raise ValueError(f"{node.name} needs a keyed stream (call key_by first)")
    return src


def build_plan(sinks: list[Node], default_parallelism: int, max_parallelism: int) -> Plan:
    """Cut the dataflow that reaches ``sinks`` into stages, edges and exchanges."""
    nodes = _ordered(sinks)
    planner = _StagePlanner(default_parallelism, max_parallelism)
    for n in nodes:
        planner.place(n)
    stages = planner.stages
    exchanges = _exchanges(stages)
    if not _orderable(stages, exchanges):
        # Grouped upstreams of separate components wait for each other in a circle: give
        # every upstream stage an exchange of its own (the order is then the stages' own).
        exchanges = _exchanges(stages, split_all=True)
    sources = [n for n in nodes if n.kind is NodeKind.SOURCE]
    return Plan(stages, sources, sinks, nodes, exchanges)


def _ordered(sinks: list[Node]) -> list[Node]:
    """The nodes that reach ``sinks``, every node after its inputs: by id where that order
    is topological, else in visit order."""
    nodes: list[Node] = []
    seen: set[Node] = set()

    def visit(n: Node) -> None:
        if n in seen:
            return
        seen.add(n)
        for i in n.inputs:
            visit(i)
        nodes.append(n)

    for s in sinks:
        visit(s)
    by_id = sorted(nodes, key=lambda n: n.id)
    # Nodes kept from an earlier job's dataflow (a stream reused after execute()) keep their
    # ids, which may then repeat or not follow the edges: the visit order is topological.
    return by_id if _topological(by_id) else nodes


class _StagePlanner:
    """Places nodes, in topological order, into stages: a new stage, or chained into the
    stage of their input."""

    def __init__(self, default_parallelism: int, max_parallelism: int) -> None:
        self.default_parallelism = default_parallelism
        self.max_parallelism = max_parallelism
        self.stages: list[Stage] = []
        self.stage_of: dict[Node, Stage] = {}
        # (key_by node, parallelism) -> the stage of the keyed operators reading it
        self.keyed_stage: dict[tuple[Node, int], Stage] = {}

    def place(self, n: Node) -> None:
        """Put ``n`` into a stage (virtual nodes only shape their consumers' edges)."""
        if n.kind.virtual:
            return
        if n.kind is NodeKind.SOURCE:
            self._new_stage(n, 0, source=n)
        elif n.kind.two_input:
            self._place_two_input(n)
        elif n.kind.keyed:
            self._place_keyed(n)
        else:
            self._place_one_input(n)

    def _parallelism(self, n: Node) -> int:
        return n.parallelism or self.default_parallelism

    def _new_stage(self, root: Node, parallelism: int, **kw: Any) -> Stage:
        st = Stage(len(self.stages), [root], parallelism, **kw)
        st.members.append(root)
        self.stages.append(st)
        self.stage_of[root] = st
        return st

    def _new_operator_stage(self, root: Node) -> Stage:
        mp = root.max_parallelism or self.max_parallelism
        return self._new_stage(root, self._parallelism(root), max_parallelism=mp)

    def _connect(self, st: Stage, root: Node, side: int, producers: list[Producer]) -> None:
        for producer, part in producers:
            up = self.stage_of[producer]
            if part is None or (part.kind == "forward" and up.parallelism != st.parallelism):
                same = up.parallelism == st.parallelism
                part = Partitioning("forward" if same else "rebalance")
            edge = Edge(up, producer, st, len(st.inputs), part, [(root, side)])
            st.inputs.append(edge)
            up.outputs.append(edge)

    def _place_keyed(self, n: Node) -> None:
        """A one-input keyed operator: into the stage of the keyed operators that read the
        same ``key_by`` at the same parallelism, else a new one."""
        kb = _key_input(n)
        p = self._parallelism(n)
        existing = self.keyed_stage.get((kb, p))
        if existing is not None:
            existing.roots.append(n)
            existing.members.append(n)
            existing.inputs[0].targets.append((n, 0))
            self.stage_of[n] = existing
            return
        st = self._new_operator_stage(n)
        self.keyed_stage[(kb, p)] = st
        self._connect(st, n, 0, _resolve(kb, None))

    def _place_two_input(self, n: Node) -> None:
        """A two-input operator starts a stage with one edge per input."""
        if n.kind.keyed:
            _key_input(n, 0)
            if not n.kind.broadcast:
                _key_input(n, 1)
        st = self._new_operator_stage(n)
        for side, inp in enumerate(n.inputs):
            self._connect(st, n, side, _resolve(inp, None))

    def _place_one_input(self, n: Node) -> None:
        """Chained into its input's stage when it can be, else the root of a new stage."""
        producers = _resolve(n.inputs[0], None)
        up = self._chain_target(n, producers)
        if up is not None:
            up.members.append(n)
            self.stage_of[n] = up
            return
        st = self._new_operator_stage(n)
        self._connect(st, n, 0, producers)

    def _chain_target(self, n: Node, producers: list[Producer]) -> Stage | None:
        """The stage ``n`` chains into: its one producer's, when no partitioning but
        ``forward`` was asked for in between and the parallelism is the same."""
        if len(producers) != 1:
            return None
        producer, part = producers[0]
        if part is not None and part.kind != "forward":
            return None
        up = self.stage_of[producer]
        if n.parallelism is None or n.parallelism == up.parallelism:
            return up
        return None


def _topological(nodes: list[Node]) -> bool:
    """Whether every node comes after its inputs (and no node appears twice)."""
    placed: set[Node] = set()
    for n in nodes:
        if n in placed or any(i not in placed for i in n.inputs):
            return False
        placed.add(n)
    return True


def _exchanges(stages: list[Stage], split_all: bool = False) -> list[Exchange]:
    """Group stages into exchanges: the connected components of upstream -> consumer, each
    one exchange, unless a consumer of the component feeds (directly or not) one of its
    upstream stages, or ``split_all``; then every upstream of the component gets an
    exchange of its own."""
    for st in stages:
        st.exchanges, st.out_exchange = [], None
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    # Union an upstream's node ("u", id) with its consumers' nodes ("d", id) by integer ids:
    # upstream i -> 2 * i, consumer i -> 2 * i + 1.
    for st in stages:
        for e in st.inputs:
            parent[find(2 * e.up.id)] = find(2 * st.id + 1)
    components: dict[int, tuple[list[Stage], list[Stage]]] = {}
    for st in stages:  # consumers in stage order: channel offsets are stable
        if st.inputs:
            comp = components.setdefault(find(2 * st.id + 1), ([], []))
            st.channel_offset = sum(c.parallelism for c in comp[1])
            comp[1].append(st)
    for st in stages:
        if st.outputs:
            components[find(2 * st.id)][0].append(st)
    out: list[Exchange] = []
    for ups, consumers in components.values():
        channels = sum(c.parallelism for c in consumers)
        if split_all or _feeds_itself(ups, consumers):
            parts = [([up], _consumers_of(up)) for up in ups]
        else:
            parts = [(ups, consumers)]
        for part_ups, part_consumers in parts:
            ex = Exchange(len(out), part_ups, part_consumers, channels)
            out.append(ex)
            for up in part_ups:
                up.out_exchange = ex.id
            for c in part_consumers:
                c.exchanges.append(ex.id)
    return out


def _consumers_of(up: Stage) -> list[Stage]:
    """The stages ``up`` feeds, in stage order, each once."""
    return sorted({e.down.id: e.down for e in up.outputs}.values(), key=lambda s: s.id)


def _feeds_itself(ups: list[Stage], consumers: list[Stage]) -> bool:
    """Whether a consumer of the group reaches one of its upstream stages downstream: one
    shuffle of the group's upstreams would then have to run before itself."""
    targets = {u.id for u in ups}
    seen: set[int] = set()
    stack = list(consumers)
    while stack:
        st = stack.pop()
        if st.id in targets:
            return True
        if st.id in seen:
            continue
        seen.add(st.id)
        stack.extend(e.down for e in st.outputs)
    return False


def _orderable(stages: list[Stage], exchanges: list[Exchange]) -> bool:
    """Whether the stages can run in an order where every upstream of the exchanges a stage
    reads runs before it."""
    state: dict[int, int] = {}  # 1: visiting, 2: done

    def visit(st: Stage) -> bool:
        if state.get(st.id) == 2:
            return True
        if state.get(st.id) == 1:
            return False
        state[st.id] = 1
        for ex_id in st.exchanges:
            if not all(visit(up) for up in exchanges[ex_id].ups):
                return False
        state[st.id] = 2
        return True

    return all(visit(st) for st in stages)
