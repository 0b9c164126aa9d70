"""``ConnectedStreams``: two streams processed by one two-input operator (PyFlink's
``DataStream.connect``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkpoint.datastream.functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
)
from sparkpoint.runtime.graph import NodeKind

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream

__all__ = ["ConnectedStreams"]


class ConnectedStreams:
    """Two streams, possibly of different types, that share one operator (and, when both
    are keyed, its keyed state and timers)."""

    def __init__(self, stream1: DataStream, stream2: DataStream) -> None:
        self.stream1 = stream1
        self.stream2 = stream2

    def _is_keyed(self) -> bool:
        return self.stream1._is_keyed and self.stream2._is_keyed

    def key_by(
        self, key_selector1: Any, key_selector2: Any, key_type: Any = None
    ) -> ConnectedStreams:
        """Key both inputs (the same key on either side reaches the same subtask)."""
        return ConnectedStreams(
            self.stream1.key_by(key_selector1, key_type),
            self.stream2.key_by(key_selector2, key_type),
        )

    def _add(self, kind: NodeKind, name: str, func: Any, output_type: Any) -> DataStream:
        """The two-input operator of ``kind``; on keyed streams a ``keyed_co_process`` that
        calls the function as ``kind`` does, with one keyed state for both inputs."""
        if self._is_keyed():
            return self.stream1._derive(
                NodeKind.KEYED_CO_PROCESS,
                name,
                output_type,
                others=(self.stream2,),
                function=func,
                co_kind=kind,
            )
        return self.stream1._derive(kind, name, output_type, others=(self.stream2,), function=func)

    def map(self, func: CoMapFunction, output_type: Any = None) -> DataStream:
        if not isinstance(func, CoMapFunction):
            raise TypeError("The input must be a CoMapFunction.")
        return self._add(NodeKind.CO_MAP, "Co-Map", func, output_type)

    def flat_map(self, func: CoFlatMapFunction, output_type: Any = None) -> DataStream:
        if not isinstance(func, CoFlatMapFunction):
            raise TypeError("The input must be a CoFlatMapFunction.")
        return self._add(NodeKind.CO_FLAT_MAP, "Co-Flat Map", func, output_type)

    def process(
        self, func: CoProcessFunction | KeyedCoProcessFunction, output_type: Any = None
    ) -> DataStream:
        if self._is_keyed():
            if not isinstance(func, KeyedCoProcessFunction):
                raise TypeError(
                    "process() on connected keyed streams takes a KeyedCoProcessFunction, "
                    f"got {type(func).__name__}"
                )
            return self._add(NodeKind.CO_PROCESS, "Keyed-Co-Process", func, output_type)
        if not isinstance(func, CoProcessFunction):
            raise TypeError(
                "process() on connected streams takes a CoProcessFunction, got "
                f"{type(func).__name__}"
                + (
                    " (key both streams to use a KeyedCoProcessFunction)"
                    if isinstance(func, KeyedCoProcessFunction)
                    else ""
                )
            )
        return self._add(NodeKind.CO_PROCESS, "Co-Process", func, output_type)
