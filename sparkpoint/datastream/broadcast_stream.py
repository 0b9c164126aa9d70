"""``BroadcastStream`` and ``BroadcastConnectedStream`` (PyFlink's
``DataStream.broadcast(descriptor, ...)`` and ``connect(broadcast_stream)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkpoint.datastream.broadcast_functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from sparkpoint.runtime.graph import NodeKind, Partitioning
from sparkpoint.state.descriptors import MapStateDescriptor

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream

__all__ = ["BroadcastConnectedStream", "BroadcastStream"]


class BroadcastStream:
    """A stream whose every record reaches every subtask of the operator it is connected
    to, with the broadcast states (``MapStateDescriptor``s) that operator holds."""

    def __init__(self, input_stream: DataStream, *broadcast_state_descriptors: Any) -> None:
        if not broadcast_state_descriptors:
            raise ValueError("broadcast() needs at least one MapStateDescriptor")
        for d in broadcast_state_descriptors:
            if not isinstance(d, MapStateDescriptor):
                raise TypeError(
                    "Broadcast state is a map: broadcast() takes MapStateDescriptors, got "
                    f"{type(d).__name__}"
                )
        self.input_stream = input_stream
        self.broadcast_state_descriptors = tuple(broadcast_state_descriptors)

    def get_execution_environment(self) -> Any:
        return self.input_stream.get_execution_environment()


class BroadcastConnectedStream:
    """A (keyed or non-keyed) stream connected with a ``BroadcastStream``: ``process`` it
    with a ``BroadcastProcessFunction`` or, when keyed, a ``KeyedBroadcastProcessFunction``."""

    def __init__(
        self,
        non_broadcast_stream: DataStream,
        broadcast_stream: BroadcastStream,
        broadcast_state_descriptors: tuple[Any, ...],
    ) -> None:
        self.non_broadcast_stream = non_broadcast_stream
        self.broadcast_stream = broadcast_stream
        self.broadcast_state_descriptors = broadcast_state_descriptors

    def _is_keyed(self) -> bool:
        return self.non_broadcast_stream._is_keyed

    def process(
        self,
        func: BroadcastProcessFunction | KeyedBroadcastProcessFunction,
        output_type: Any = None,
    ) -> DataStream:
        keyed = self._is_keyed()
        if keyed and not isinstance(func, KeyedBroadcastProcessFunction):
            raise TypeError(
                "process() on a keyed stream connected with a broadcast stream takes a "
                f"KeyedBroadcastProcessFunction, got {type(func).__name__}"
            )
        if not keyed and not isinstance(func, BroadcastProcessFunction):
            raise TypeError(
                "process() on a non-keyed stream connected with a broadcast stream takes a "
                f"BroadcastProcessFunction, got {type(func).__name__}"
                + (
                    " (key the stream to use a KeyedBroadcastProcessFunction)"
                    if isinstance(func, KeyedBroadcastProcessFunction)
                    else ""
                )
            )
        side = self.broadcast_stream.input_stream
        every_subtask = side._derive(
            NodeKind.PARTITION, "Broadcast", side.get_type(), partitioning=Partitioning("broadcast")
        )
        return self.non_broadcast_stream._derive(
            NodeKind.KEYED_BROADCAST_PROCESS if keyed else NodeKind.BROADCAST_PROCESS,
            "Co-Process-Broadcast-Keyed" if keyed else "Co-Process-Broadcast",
            output_type,
            others=(every_subtask,),
            function=func,
            broadcast_descriptors=self.broadcast_state_descriptors,
        )
