"""Keyed state API as ``pyflink.datastream.state`` spells it: descriptors, states, TTL."""

from sparkpoint.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.functions import AggregateFunction, ReduceFunction
from sparkpoint.state.heap import BroadcastState, ReadOnlyBroadcastState
from sparkpoint.state.primitives import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    State,
    ValueState,
)
from sparkpoint.state.ttl import StateTtlConfig

__all__ = [
    "AggregateFunction",
    "AggregatingState",
    "AggregatingStateDescriptor",
    "BroadcastState",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "ReadOnlyBroadcastState",
    "ReduceFunction",
    "ReducingState",
    "ReducingStateDescriptor",
    "State",
    "StateDescriptor",
    "StateTtlConfig",
    "ValueState",
    "ValueStateDescriptor",
]
