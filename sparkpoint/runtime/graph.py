"""The logical dataflow (what the DataStream API builds) and its plan into Spark stages.

A stage is a tree of chained operators run by one Spark task per subtask. Stages are cut
where records must move: at every keyed operator (a shuffle by key group) and at a union.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Node", "Plan", "Stage", "build_plan"]

KEYED = {"keyed_process", "reduce", "window"}


@dataclass(eq=False)
class Node:
    """One transformation of the dataflow."""

    id: int
    kind: str  # source | map | flat_map | filter | process | timestamps | key_by | keyed_process
    #          | reduce | window | union | side_output | sink
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

    @property
    def operator_id(self) -> str:
        """Stable id of the operator: its uid, else derived from its position in the program."""
        return self.uid or f"{self.kind}-{self.id}"


@dataclass(eq=False)
class Stage:
    """Operators run together in one Spark task per subtask."""

    id: int
    roots: list[Node]  # nodes fed by the stage input (a source, a union, or a keyed operator)
    inputs: list[Stage]  # upstream stages (empty for a source stage)
    parallelism: int
    key_selector: Any = None  # set when the stage input is shuffled by key
    max_parallelism: int = 128
    source: Node | None = None
    exit: Node | None = None  # the node whose output feeds the next stage
    members: list[Node] = field(default_factory=list)

    @property
    def keyed_nodes(self) -> list[Node]:
        """The keyed operators of this stage (each has its own keyed state)."""
        return [n for n in self.members if n.kind in KEYED]


@dataclass
class Plan:
    """Stages in execution order; the last ones are the sink stages."""

    stages: list[Stage]
    sources: list[Node]
    sinks: list[Node]
    nodes: list[Node]

    def to_json(self, default_parallelism: int = 1) -> str:
        """Flink-style execution plan JSON (``get_execution_plan``)."""
        stage_of = {n.id: s for s in self.stages for n in s.members}
        out = []
        for n in self.nodes:
            s = stage_of.get(n.id)
            entry: dict[str, Any] = {
                "id": n.id,
                "type": n.kind,
                "pact": "Data Source"
                if n.kind == "source"
                else ("Data Sink" if n.kind == "sink" else "Operator"),
                "contents": n.name,
                # Source and union stages run one task per split / input partition.
                "parallelism": (s.parallelism if s and s.parallelism else None)
                or n.parallelism
                or default_parallelism,
            }
            if n.inputs:
                entry["predecessors"] = [
                    {
                        "id": i.id,
                        "ship_strategy": "HASH"
                        if n.kind in KEYED
                        else ("REBALANCE" if n.kind == "union" else "FORWARD"),
                        "side": "second",
                    }
                    for i in n.inputs
                ]
            out.append(entry)
        return json.dumps({"nodes": out}, indent=2)


def _key_input(node: Node) -> Node:
    """The ``key_by`` node in front of a keyed operator."""
    src = node.inputs[0]
    if src.kind != "key_by":
        raise ValueError(f"{node.name} needs a keyed stream (call key_by first)")
    return src


def build_plan(sinks: list[Node], default_parallelism: int, max_parallelism: int) -> Plan:
    """Cut the dataflow that reaches ``sinks`` into stages."""
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

    def new_stage(roots: list[Node], inputs: list[Stage], parallelism: int, **kw: Any) -> Stage:
        st = Stage(len(stages), roots, inputs, parallelism, **kw)
        stages.append(st)
        return st

    for n in nodes:
        if n.kind == "source":
            st = new_stage([n], [], 0, source=n)
            st.members.append(n)
            stage_of[n] = st
        elif n.kind == "key_by":
            stage_of[n] = stage_of[n.inputs[0]]  # cut happens at the keyed consumer
        elif n.kind in KEYED:
            kb = _key_input(n)
            up = stage_of[kb.inputs[0]]
            p = n.parallelism or default_parallelism
            mp = n.max_parallelism or max_parallelism
            existing = next(
                (s for s in stages if s.key_selector is kb.key_selector and s.inputs == [up]),
                None,
            )
            if existing is not None and existing.parallelism == p:
                existing.roots.append(n)
                existing.members.append(n)
                stage_of[n] = existing
                continue
            _set_exit(up, kb.inputs[0])
            st = new_stage([n], [up], p, key_selector=kb.key_selector, max_parallelism=mp)
            st.members.append(n)
            stage_of[n] = st
        elif n.kind == "union":
            ups = []
            for i in n.inputs:
                up = stage_of[i]
                _set_exit(up, i)
                ups.append(up)
            st = new_stage([n], ups, 0)
            st.members.append(n)
            stage_of[n] = st
        else:
            st = stage_of[n.inputs[0]]
            st.members.append(n)
            stage_of[n] = st
    return Plan(stages, [n for n in nodes if n.kind == "source"], sinks, nodes)


def _topological(nodes: list[Node]) -> bool:
    """Whether every node comes after its inputs (and no node appears twice)."""
    placed: set[Node] = set()
    for n in nodes:
        if n in placed or any(i not in placed for i in n.inputs):
            return False
        placed.add(n)
    return True


def _set_exit(stage: Stage, node: Node) -> None:
    if stage.exit is not None and stage.exit is not node:
        raise ValueError(
            f"Stage {stage.id}: the output of '{stage.exit.name}' and of '{node.name}' would "
            "both leave the stage; sparkpoint supports one shuffled output per stage "
            "(apply both branches after a common key_by, or union them first)."
        )
    stage.exit = node
