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
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BROADCAST",
    "KEYED",
    "VIRTUAL",
    "Edge",
    "Exchange",
    "Node",
    "Partitioning",
    "Plan",
    "Stage",
    "build_plan",
]

KEYED = {"keyed_process", "reduce", "window", "keyed_co_process", "keyed_broadcast_process"}
# Broadcast operators: input 0 the (keyed or not) stream, input 1 the broadcast stream; each
# holds operator (broadcast) state.
BROADCAST = {"broadcast_process", "keyed_broadcast_process"}
TWO_INPUT = {"co_map", "co_flat_map", "co_process", "keyed_co_process", *BROADCAST}
VIRTUAL = {"key_by", "union", "partition"}
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
    """One transformation of the dataflow."""

    id: int
    kind: str  # source | map | flat_map | filter | process | timestamps | key_by | keyed_process
    #          | reduce | window | union | partition | side_output | co_map | co_flat_map
    #          | co_process | keyed_co_process | broadcast_process | keyed_broadcast_process
    #          | sink
    name: str
    inputs: list[Node] = field(default_factory=list)
    function: Any = None
    key_selector: Any = None
    source: Any = None
    sink: Any = None
    watermark_strategy: Any = None
    output_type: Any = None
    parallelism: int | None = None
    max_parallelism: int | None = None
    uid: str | None = None
    call: Any = None  # keyed map/flat_map/filter adapter (see DataStream)
    tag_id: str | None = None  # side_output: the OutputTag id read from the input operator
    partitioning: Partitioning | None = None  # partition: what its consumers' edges use
    # broadcast_process, keyed_broadcast_process: the MapStateDescriptors of broadcast()
    broadcast_descriptors: tuple[Any, ...] = ()

    @property
    def operator_id(self) -> str:
        """Stable id of the operator: its uid, else derived from its position in the program."""
        return self.uid or f"{self.kind}-{self.id}"


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
        return [n for n in self.members if n.kind in KEYED]

    @property
    def operator_state_nodes(self) -> list[Node]:
        """The operators of this stage that hold operator (broadcast) state."""
        return [n for n in self.members if n.kind in BROADCAST]

    @property
    def keyed(self) -> bool:
        """Whether the stage holds keyed state (its subtasks are placed and pinned)."""
        return any(n.kind in KEYED for n in self.members)


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
            if n.kind in VIRTUAL:
                continue
            s = stage_of.get(n)
            entry: dict[str, Any] = {
                "id": n.id,
                "type": n.kind,
                "pact": "Data Source"
                if n.kind == "source"
                else ("Data Sink" if n.kind == "sink" else "Operator"),
                "contents": n.name,
                # Source stages run one task per split.
                "parallelism": (s.parallelism if s and s.parallelism else None)
                or n.parallelism
                or default_parallelism,
            }
            preds = []
            for side, inp in enumerate(n.inputs):
                for producer, _part in _resolve(inp, None):
                    preds.append(
                        {
                            "id": producer.id,
                            "ship_strategy": strategy.get((producer, n), "FORWARD"),
                            "side": "second" if side else "first",
                        }
                    )
            if preds:
                entry["predecessors"] = preds
            out.append(entry)
        return json.dumps({"nodes": out}, indent=2)


def _resolve(node: Node, outer: Partitioning | None) -> list[tuple[Node, Partitioning | None]]:
    """The real producers behind ``node`` (through key_by, union and partitioning nodes) and
    the partitioning their records take; the partitioning nearest the consumer wins."""
    if node.kind == "key_by":
        part = outer or Partitioning("hash", key_selector=node.key_selector)
        return _resolve(node.inputs[0], part)
    if node.kind == "partition":
        return _resolve(node.inputs[0], outer or node.partitioning)
    if node.kind == "union":
        out: list[tuple[Node, Partitioning | None]] = []
        for i in node.inputs:
            out.extend(_resolve(i, outer))
        return out
    return [(node, outer)]


def _key_input(node: Node, side: int = 0) -> Node:
    """The ``key_by`` node in front of a keyed operator."""
    src = node.inputs[side]
    if src.kind != "key_by":
        raise ValueError(f"{node.name} needs a keyed stream (call key_by first)")
    return src


def build_plan(sinks: list[Node], default_parallelism: int, max_parallelism: int) -> Plan:
    """Cut the dataflow that reaches ``sinks`` into stages, edges and exchanges."""
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
    if _topological(by_id):
        nodes = by_id
    stages: list[Stage] = []
    stage_of: dict[Node, Stage] = {}
    keyed_stage: dict[tuple[Node, int], Stage] = {}  # (key_by node, parallelism) -> stage

    def new_stage(root: Node, parallelism: int, **kw: Any) -> Stage:
        st = Stage(len(stages), [root], parallelism, **kw)
        st.members.append(root)
        stages.append(st)
        stage_of[root] = st
        return st

    def connect(st: Stage, root: Node, side: int, producers: list[Any]) -> None:
        for producer, part in producers:
            up = stage_of[producer]
            if part is None or (part.kind == "forward" and up.parallelism != st.parallelism):
                same = up.parallelism == st.parallelism
                part = Partitioning("forward" if same else "rebalance")
            edge = Edge(up, producer, st, len(st.inputs), part, [(root, side)])
            st.inputs.append(edge)
            up.outputs.append(edge)

    for n in nodes:
        if n.kind in VIRTUAL:
            continue
        if n.kind == "source":
            st = new_stage(n, 0, source=n)
            continue
        mp = n.max_parallelism or max_parallelism
        if n.kind in KEYED and n.kind not in TWO_INPUT:
            kb = _key_input(n)
            p = n.parallelism or default_parallelism
            existing = keyed_stage.get((kb, p))
            if existing is not None:
                existing.roots.append(n)
                existing.members.append(n)
                existing.inputs[0].targets.append((n, 0))
                stage_of[n] = existing
                continue
            st = new_stage(n, p, max_parallelism=mp)
            keyed_stage[(kb, p)] = st
            connect(st, n, 0, _resolve(kb, None))
            continue
        if n.kind in TWO_INPUT:
            if n.kind in KEYED:
                _key_input(n, 0)
                if n.kind not in BROADCAST:
                    _key_input(n, 1)
            st = new_stage(n, n.parallelism or default_parallelism, max_parallelism=mp)
            for side, inp in enumerate(n.inputs):
                connect(st, n, side, _resolve(inp, None))
            continue
        producers = _resolve(n.inputs[0], None)
        if len(producers) == 1 and producers[0][1] is None:
            up = stage_of[producers[0][0]]
            if n.parallelism is None or n.parallelism == up.parallelism:
                up.members.append(n)
                stage_of[n] = up
                continue
        if (
            len(producers) == 1
            and producers[0][1] is not None
            and producers[0][1].kind == "forward"
        ):
            up = stage_of[producers[0][0]]
            if n.parallelism is None or n.parallelism == up.parallelism:
                up.members.append(n)
                stage_of[n] = up
                continue
        st = new_stage(n, n.parallelism or default_parallelism, max_parallelism=mp)
        connect(st, n, 0, producers)
    exchanges = _exchanges(stages)
    if not _orderable(stages, exchanges):
        # Grouped upstreams of separate components wait for each other in a circle: give
        # every upstream stage an exchange of its own (the order is then the stages' own).
        exchanges = _exchanges(stages, split_all=True)
    return Plan(stages, [n for n in nodes if n.kind == "source"], sinks, nodes, exchanges)


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
