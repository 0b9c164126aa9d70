"""The broadcast-state API as PyFlink spells it: ``broadcast(descriptor, ...)``,
``connect(broadcast_stream)``, ``BroadcastConnectedStream.process`` and the plan it makes
(no Spark: the job is planned, not run)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import sparkpoint.datastream as ds
from sparkpoint.common import Types
from sparkpoint.datastream import (
    BroadcastConnectedStream,
    BroadcastProcessFunction,
    BroadcastStream,
    DataStream,
    KeyedBroadcastProcessFunction,
    StreamExecutionEnvironment,
)
from sparkpoint.datastream.functions import BaseBroadcastProcessFunction
from sparkpoint.datastream.state import (
    BroadcastState,
    MapStateDescriptor,
    ReadOnlyBroadcastState,
    ValueStateDescriptor,
)
from sparkpoint.runtime.graph import build_plan

RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())
LIMITS = MapStateDescriptor("limits", Types.STRING(), Types.INT())


class Plain(BroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put(value, 1)


class Keyed(KeyedBroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        return None


def test_names_pyflink_exports() -> None:
    for name in (
        "BroadcastStream",
        "BroadcastConnectedStream",
        "BroadcastProcessFunction",
        "KeyedBroadcastProcessFunction",
    ):
        assert name in ds.__all__ and hasattr(ds, name)
    assert issubclass(BroadcastProcessFunction, BaseBroadcastProcessFunction)
    assert issubclass(BroadcastState, ReadOnlyBroadcastState)
    assert hasattr(KeyedBroadcastProcessFunction.Context, "apply_to_keyed_state")
    assert hasattr(KeyedBroadcastProcessFunction.ReadOnlyContext, "timer_service")


def test_broadcast_with_and_without_descriptors() -> None:
    env = StreamExecutionEnvironment()
    rules = env.from_collection([("a", 1)])
    assert isinstance(rules.broadcast(), DataStream)  # a partitioning, as before
    stream = rules.broadcast(RULES, LIMITS)
    assert isinstance(stream, BroadcastStream)
    assert stream.broadcast_state_descriptors == (RULES, LIMITS)
    with pytest.raises(TypeError, match="MapStateDescriptors"):
        rules.broadcast(ValueStateDescriptor("v", Types.INT()))
    with pytest.raises(TypeError, match="Cannot override partitioning for KeyedStream"):
        rules.key_by(lambda r: r[0]).broadcast(RULES)
    connected = env.from_collection([1]).connect(stream)
    assert isinstance(connected, BroadcastConnectedStream)
    with pytest.raises(TypeError, match="DataStream or a BroadcastStream"):
        env.from_collection([1]).connect(RULES)  # type: ignore[call-overload]


def test_process_checks_the_function_against_the_stream() -> None:
    env = StreamExecutionEnvironment()
    stream = env.from_collection([("a", 1)]).broadcast(RULES)
    events = env.from_collection([1, 2])
    with pytest.raises(TypeError, match=r"BroadcastProcessFunction, got Keyed .*key the stream"):
        events.connect(stream).process(Keyed())
    with pytest.raises(TypeError, match="KeyedBroadcastProcessFunction, got Plain"):
        events.key_by(lambda x: x).connect(stream).process(Plain())


@pytest.mark.parametrize("keyed", [False, True])
def test_plan_broadcasts_the_second_input_into_one_operator_with_broadcast_state(
    keyed: bool,
) -> None:
    env = StreamExecutionEnvironment()
    env.set_parallelism(3)
    events = env.from_collection([1, 2, 3])
    rules = env.from_collection([("a", 1)])
    left = events.key_by(lambda x: x) if keyed else events
    out = left.connect(rules.broadcast(RULES)).process(Keyed() if keyed else Plain())
    out.print()
    by_name = {n["contents"]: n for n in json.loads(env.get_execution_plan())["nodes"]}
    name = "Co-Process-Broadcast-Keyed" if keyed else "Co-Process-Broadcast"
    first, second = by_name[name]["predecessors"]
    assert first["ship_strategy"] == ("HASH" if keyed else "REBALANCE")
    assert (second["side"], second["ship_strategy"]) == ("second", "BROADCAST")
    plan = build_plan(env._sinks, 3, 128)
    (stage,) = [st for st in plan.stages if st.operator_state_nodes]
    assert [n.kind for n in stage.operator_state_nodes] == [
        "keyed_broadcast_process" if keyed else "broadcast_process"
    ]
    assert stage.keyed is keyed and stage.parallelism == 3
    assert stage.operator_state_nodes[0].broadcast_descriptors == (RULES,)
