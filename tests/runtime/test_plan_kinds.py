"""The kinds of plan nodes: their properties, the operator ids and plan JSON they give, and
one operator factory for each (planned without Spark)."""

from __future__ import annotations

import json

from sparkpoint.runtime.graph import Node, NodeKind, Plan
from sparkpoint.runtime.task.stage_tree import OPERATOR_FACTORIES


def _kinds(prop: str) -> set[str]:
    return {kind.value for kind in NodeKind if getattr(kind, prop)}


def test_the_kind_properties() -> None:
    assert _kinds("keyed") == {
        "keyed_process",
        "reduce",
        "window",
        "keyed_co_process",
        "keyed_broadcast_process",
    }
    assert _kinds("broadcast") == {"broadcast_process", "keyed_broadcast_process"}
    assert _kinds("two_input") == {
        "co_map",
        "co_flat_map",
        "co_process",
        "keyed_co_process",
        "broadcast_process",
        "keyed_broadcast_process",
    }
    assert _kinds("virtual") == {"key_by", "union", "partition"}


def test_every_kind_has_an_operator_factory() -> None:
    assert set(OPERATOR_FACTORIES) == set(NodeKind)


def test_operator_ids_and_the_plan_json_use_the_kinds_value() -> None:
    source = Node(0, NodeKind.SOURCE, "numbers")
    mapped = Node(1, NodeKind.MAP, "Map", [source])
    sink = Node(2, NodeKind.SINK, "Print", [mapped])
    assert [n.operator_id for n in (source, mapped, sink)] == ["source-0", "map-1", "sink-2"]
    nodes = json.loads(Plan([], [source], [sink], [source, mapped, sink]).to_json())["nodes"]
    assert [(n["type"], n["pact"]) for n in nodes] == [
        ("source", "Data Source"),
        ("map", "Operator"),
        ("sink", "Data Sink"),
    ]
