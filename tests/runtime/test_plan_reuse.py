"""A stream kept from a job that already ran (PyFlink's examples reuse a source across
several execute() calls) plans again: the next job's node ids restart at 0."""

from __future__ import annotations

from sparkpoint.runtime.graph import Node, NodeKind, build_plan
from sparkpoint.runtime.task.stage_tree import build_tree


def test_nodes_of_an_earlier_job_with_repeated_ids_plan_in_topological_order() -> None:
    # first job: source 0 -> map 1 -> map 2 -> sink 3; the second job reuses map 2 and
    # numbers its own nodes from 0 again
    source = Node(0, NodeKind.SOURCE, "Collection Source")
    first = Node(1, NodeKind.MAP, "Map", [source])
    reused = Node(2, NodeKind.MAP, "Map", [first])
    mapped = Node(0, NodeKind.MAP, "Map", [reused])
    sink = Node(1, NodeKind.SINK, "Print", [mapped])
    plan = build_plan([sink], 1, 128)
    assert len(plan.stages) == 1
    members = plan.stages[0].members
    assert members == [source, first, reused, mapped, sink]
    roots = build_tree(plan.stages[0], False, None, [], []).roots
    chain = [roots[0]]
    while chain[-1].children:
        assert len(chain[-1].children) == 1
        chain.append(chain[-1].children[0])
    assert len(chain) == 5  # every operator once, in order, despite the repeated ids
