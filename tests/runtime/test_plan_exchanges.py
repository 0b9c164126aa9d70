"""Exchanges (one Spark shuffle each): upstream stages that feed a common consumer share one,
unless that group would have to run before itself (a stream combined with a result derived
from it through another consumer of the same upstream); then each upstream gets its own and
a consumer reads several (planned without Spark)."""

from __future__ import annotations

from sparkpoint.runtime.graph import Node, NodeKind, Partitioning, Plan, build_plan


def _sink(name: str, producer: Node, ids: list[int]) -> Node:
    ids[0] += 1
    return Node(ids[0], NodeKind.SINK, name, [producer])


def _plan(shape: str) -> tuple[Plan, dict[str, Node]]:
    """``fan-out``: a source feeding a keyed count and a stateless map; ``joined``: the
    source connected with its own keyed result, and a union of the two keyed again."""
    ids = [0]

    def node(kind: NodeKind, name: str, inputs: list[Node], **kw: object) -> Node:
        ids[0] += 1
        return Node(ids[0], kind, name, inputs, **kw)  # type: ignore[arg-type]

    source = node(NodeKind.SOURCE, "numbers", [])
    keyed = node(NodeKind.KEY_BY, "key_by", [source], key_selector=lambda x: x % 3)
    totals = node(NodeKind.REDUCE, "totals", [keyed], parallelism=2)
    named = {"source": source, "totals": totals}
    if shape == "fan-out":
        rebalanced = node(
            NodeKind.PARTITION, "rebalance", [source], partitioning=Partitioning("rebalance")
        )
        mapped = node(NodeKind.MAP, "map", [rebalanced], parallelism=2)
        sinks = [_sink("a", totals, ids), _sink("b", mapped, ids)]
        named["map"] = mapped
    else:
        both = node(NodeKind.CO_MAP, "tag", [source, totals], parallelism=2)
        union = node(NodeKind.UNION, "union", [source, totals])
        again = node(
            NodeKind.KEYED_PROCESS,
            "summary",
            [node(NodeKind.KEY_BY, "key_by", [union], key_selector=lambda x: x % 2)],
            parallelism=2,
        )
        sinks = [_sink("a", both, ids), _sink("b", again, ids)]
        named.update(tag=both, summary=again)
    return build_plan(sinks, 1, 128), named


def _stage(plan: Plan, node: Node):  # type: ignore[no-untyped-def]
    return next(s for s in plan.stages if node in s.members)


def test_a_fan_out_shares_one_exchange() -> None:
    plan, n = _plan("fan-out")
    source = _stage(plan, n["source"])
    assert len(plan.exchanges) == 1
    (ex,) = plan.exchanges
    assert ex.ups == [source] and source.out_exchange == ex.id
    assert {c.id for c in ex.consumers} == {_stage(plan, n["totals"]).id, _stage(plan, n["map"]).id}
    assert ex.channels == 4  # both consumers' channels, one space
    assert all(c.exchanges == [ex.id] for c in ex.consumers)


def test_a_stream_joined_with_its_own_result_gets_an_exchange_per_upstream() -> None:
    plan, n = _plan("joined")
    source, totals = _stage(plan, n["source"]), _stage(plan, n["totals"])
    tag, summary = _stage(plan, n["tag"]), _stage(plan, n["summary"])
    by_up = {ex.ups[0].id: ex for ex in plan.exchanges}
    assert all(len(ex.ups) == 1 for ex in plan.exchanges)
    assert set(by_up) == {source.id, totals.id}
    assert [c.id for c in by_up[source.id].consumers] == [totals.id, tag.id, summary.id]
    assert [c.id for c in by_up[totals.id].consumers] == [tag.id, summary.id]
    # the two exchanges share one channel space, so every consumer keeps one offset
    assert by_up[source.id].channels == by_up[totals.id].channels == 6
    assert [totals.channel_offset, tag.channel_offset, summary.channel_offset] == [0, 2, 4]
    assert (
        sorted(tag.exchanges)
        == sorted(summary.exchanges)
        == sorted([by_up[source.id].id, by_up[totals.id].id])
    )
    assert totals.exchanges == [by_up[source.id].id]
