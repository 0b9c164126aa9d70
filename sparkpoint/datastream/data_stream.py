"""``DataStream``, ``KeyedStream`` and ``DataStreamSink``, spelled as in PyFlink.

Each call adds a node to the environment's dataflow; nothing runs until ``execute``.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, overload

from sparkpoint.connectors.sink import CollectSink, PrintSink, Sink
from sparkpoint.datastream.broadcast_stream import BroadcastConnectedStream, BroadcastStream
from sparkpoint.datastream.connected_streams import ConnectedStreams
from sparkpoint.datastream.functions import (
    FilterFunction,
    FilterFunctionWrapper,
    FlatMapFunction,
    FlatMapFunctionWrapper,
    KeyedProcessFunction,
    KeySelector,
    KeySelectorFunctionWrapper,
    MapFunction,
    MapFunctionWrapper,
    NullByteKeySelector,
    Partitioner,
    PartitionerFunctionWrapper,
    ProcessFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
    SinkFunction,
    TypedKeySelector,
)
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.slot_sharing_group import SlotSharingGroup
from sparkpoint.datastream.window import CountSlidingWindowAssigner, CountTumblingWindowAssigner
from sparkpoint.datastream.windowed_stream import AllWindowedStream, WindowedStream
from sparkpoint.errors import JavaFunctionError
from sparkpoint.runtime.graph import Node, NodeKind, Partitioning
from sparkpoint.state.key_groups import KeyGroupAssigner
from sparkpoint.state.typeinfo import TupleTypeInfo
from sparkpoint.types import Row

if TYPE_CHECKING:
    from sparkpoint.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["CloseableIterator", "DataStream", "DataStreamSink", "KeyedStream"]


def _wrap(func: Any, base: type, wrapper: type, what: str) -> Any:
    if isinstance(func, base):
        return func
    if callable(func):
        return wrapper(func)
    raise TypeError(f"{what} must be a callable or a {base.__name__}, got {type(func).__name__}")


class DataStream:
    """A stream of records of one type."""

    # Whether records are partitioned by key (``KeyedStream``): read by the stream classes
    # of this package that add keyed operators when their input is keyed.
    _is_keyed: ClassVar[bool] = False

    def __init__(self, env: StreamExecutionEnvironment, node: Node) -> None:
        self._env = env
        self._node = node

    # -- naming and parallelism -----------------------------------------------------------
    def get_name(self) -> str:
        return self._node.name

    def name(self, name: str) -> DataStream:
        self._node.name = name
        return self

    def uid(self, uid: str) -> DataStream:
        """A stable operator id: state in checkpoints is matched to operators by it."""
        if not uid:
            raise ValueError("uid must be a non-empty string")
        self._node.uid = uid
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStream:
        return self.uid(uid_hash)

    def set_parallelism(self, parallelism: int) -> DataStream:
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(
                f"The parallelism of an operator must be at least 1, got {parallelism}"
            )
        self._node.parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        if not 0 < max_parallelism <= 32767:
            raise ValueError("The maximum parallelism must be between 1 and 32767")
        self._node.max_parallelism = max_parallelism
        return self

    def get_type(self) -> Any:
        return self._node.output_type

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    def get_execution_config(self) -> Any:
        """The ``ExecutionConfig`` of the environment this stream belongs to."""
        return self._env.get_config()

    # Chaining hints: sparkpoint chains what Flink would chain (same parallelism, forward).
    def disable_chaining(self) -> DataStream:
        return self

    def start_new_chain(self) -> DataStream:
        return self

    def slot_sharing_group(self, slot_sharing_group: str | SlotSharingGroup) -> DataStream:
        """Recorded on the operator (and its resources, for a ``SlotSharingGroup``); shown in
        ``get_execution_plan``; its CPU cores become the stage's CPUs per Spark task where
        Spark has stage-level scheduling (docs/architecture.md, "Limitations")."""
        _set_slot_sharing_group(self._node, slot_sharing_group)
        return self

    def set_description(self, description: str) -> DataStream:
        """A longer description of the operator, shown in ``get_execution_plan``."""
        self._node.description = _description(description)
        return self

    def cache(self) -> DataStream:
        """Accepted without effect: Flink keeps a bounded stream's result for later jobs of the
        environment; sparkpoint computes it again in each job."""
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> DataStream:
        return self

    def force_non_parallel(self) -> DataStream:
        return self.set_parallelism(1)

    # -- partitioning (Flink's StreamPartitioners) -------------------------------------------
    def _partition(self, partitioning: Partitioning, name: str) -> DataStream:
        return self._derive(
            NodeKind.PARTITION, name, self._node.output_type, partitioning=partitioning
        )

    def shuffle(self) -> DataStream:
        """Each record to a uniformly random subtask of the next operator."""
        return self._partition(Partitioning("shuffle"), "Shuffle")

    def rebalance(self) -> DataStream:
        """Records round-robin over the subtasks of the next operator."""
        return self._partition(Partitioning("rebalance"), "Rebalance")

    def rescale(self) -> DataStream:
        """Round-robin over a subset of the next operator's subtasks (pointwise)."""
        return self._partition(Partitioning("rescale"), "Rescale")

    def forward(self) -> DataStream:
        """Each record to the next operator's subtask of the same index."""
        return self._partition(Partitioning("forward"), "Forward")

    def global_(self) -> DataStream:
        """Every record to the first subtask of the next operator."""
        return self._partition(Partitioning("global"), "Global")

    @overload
    def broadcast(self) -> DataStream: ...

    @overload
    def broadcast(
        self, broadcast_state_descriptor: Any, *other_broadcast_state_descriptors: Any
    ) -> BroadcastStream: ...

    def broadcast(
        self, broadcast_state_descriptor: Any = None, *other_broadcast_state_descriptors: Any
    ) -> DataStream | BroadcastStream:
        """Every record to every subtask of the next operator; with ``MapStateDescriptor``s,
        a ``BroadcastStream`` to ``connect`` to, whose operator holds those broadcast
        states."""
        if broadcast_state_descriptor is not None:
            return BroadcastStream(
                self, broadcast_state_descriptor, *other_broadcast_state_descriptors
            )
        return self._partition(Partitioning("broadcast"), "Broadcast")

    def partition_custom(
        self,
        partitioner: Partitioner | Callable[[Any, int], int],
        key_selector: KeySelector | Callable[[Any], Any],
    ) -> DataStream:
        """Each record to subtask ``partitioner.partition(key_selector(record), n)``."""
        p = _wrap(partitioner, Partitioner, PartitionerFunctionWrapper, "partitioner")
        ks = _wrap(key_selector, KeySelector, KeySelectorFunctionWrapper, "key selector")
        return self._partition(
            Partitioning("custom", key_selector=ks, partitioner=p), "Custom Partition"
        )

    # -- transformations -------------------------------------------------------------------
    def _add(
        self,
        kind: NodeKind,
        name: str,
        output_type: Any = None,
        others: Sequence[DataStream] = (),
        **fields: Any,
    ) -> Node:
        """A new node of the dataflow that reads this stream (then ``others``)."""
        inputs = [self._node, *(o._node for o in others)]
        return self._env._add_node(kind, name, inputs, output_type=output_type, **fields)

    def _derive(
        self,
        kind: NodeKind,
        name: str,
        output_type: Any = None,
        *,
        others: Sequence[DataStream] = (),
        **fields: Any,
    ) -> DataStream:
        """The stream of a new operator that reads this stream (then ``others``, its further
        inputs); ``fields`` are the ``Node``'s. The one way the stream classes of this
        package (connected, broadcast, windowed, async) add their operators."""
        return DataStream(self._env, self._add(kind, name, output_type, others, **fields))

    def map(self, func: Callable[[Any], Any] | MapFunction, output_type: Any = None) -> DataStream:
        fn = _wrap(func, MapFunction, MapFunctionWrapper, "map function")
        return self._derive(NodeKind.MAP, "Map", output_type, function=fn)

    def flat_map(
        self, func: Callable[[Any], Any] | FlatMapFunction, output_type: Any = None
    ) -> DataStream:
        fn = _wrap(func, FlatMapFunction, FlatMapFunctionWrapper, "flat_map function")
        return self._derive(NodeKind.FLAT_MAP, "FlatMap", output_type, function=fn)

    def filter(self, func: Callable[[Any], bool] | FilterFunction) -> DataStream:
        fn = _wrap(func, FilterFunction, FilterFunctionWrapper, "filter function")
        return self._derive(NodeKind.FILTER, "Filter", self._node.output_type, function=fn)

    def process(self, func: ProcessFunction, output_type: Any = None) -> DataStream:
        if not isinstance(func, ProcessFunction):
            raise TypeError("process() on a DataStream takes a ProcessFunction")
        return self._derive(NodeKind.PROCESS, "Process", output_type, function=func)

    def key_by(
        self, key_selector: Callable[[Any], Any] | KeySelector, key_type: Any = None
    ) -> KeyedStream:
        ks = _wrap(key_selector, KeySelector, KeySelectorFunctionWrapper, "key selector")
        assigner = KeyGroupAssigner(key_type)
        if assigner.type_name is not None:  # a type whose Java hash is not the value rule's
            ks = TypedKeySelector(ks, assigner)
        node = self._add(NodeKind.KEY_BY, "KeyBy", self._node.output_type, key_selector=ks)
        return KeyedStream(self._env, node)

    def window_all(self, window_assigner: Any) -> AllWindowedStream:
        """All records cut into windows by ``window_assigner``, evaluated by one task."""
        keyed = self.key_by(NullByteKeySelector())
        return AllWindowedStream(keyed, window_assigner)

    def union(self, *streams: DataStream) -> DataStream:
        if not streams:
            return self
        return self._derive(NodeKind.UNION, "Union", self._node.output_type, others=streams)

    def get_side_output(self, output_tag: OutputTag) -> DataStream:
        """The records this operator's function yielded as ``(output_tag, value)``."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(
                f"get_side_output() takes an OutputTag, got {type(output_tag).__name__}"
            )
        return self._derive(
            NodeKind.SIDE_OUTPUT,
            f"SideOutput:{output_tag.tag_id}",
            output_tag.type_info,
            tag_id=output_tag.tag_id,
        )

    @overload
    def connect(self, ds: DataStream) -> ConnectedStreams: ...

    @overload
    def connect(self, ds: BroadcastStream) -> BroadcastConnectedStream: ...

    def connect(
        self, ds: DataStream | BroadcastStream
    ) -> ConnectedStreams | BroadcastConnectedStream:
        """This stream and ``ds`` into one two-input operator (``map``/``flat_map`` with a
        CoMap/CoFlatMapFunction, ``process`` with a (Keyed)CoProcessFunction); with a
        ``BroadcastStream``, a ``BroadcastConnectedStream`` (``process`` with a
        (Keyed)BroadcastProcessFunction)."""
        if isinstance(ds, BroadcastStream):
            return BroadcastConnectedStream(self, ds, ds.broadcast_state_descriptors)
        if not isinstance(ds, DataStream):
            raise TypeError(
                f"connect() takes a DataStream or a BroadcastStream, got {type(ds).__name__}"
            )
        return ConnectedStreams(self, ds)

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> DataStream:
        return self._derive(
            NodeKind.TIMESTAMPS,
            "Timestamps/Watermarks",
            self._node.output_type,
            watermark_strategy=watermark_strategy,
        )

    # -- sinks -----------------------------------------------------------------------------
    def print(self, sink_identifier: str | None = None) -> DataStreamSink:
        """Print every record on the driver's standard output."""
        return self.sink_to(PrintSink(self._node.output_type, sink_identifier), "Print to Std. Out")

    def sink_to(self, sink: Sink, name: str = "Sink") -> DataStreamSink:
        if not isinstance(sink, Sink):
            raise TypeError(f"sink_to() takes a Sink (e.g. FileSink), got {type(sink).__name__}")
        if getattr(sink, "type_info", None) is None and hasattr(sink, "type_info"):
            sink.type_info = self._node.output_type
        node = self._add(NodeKind.SINK, name, None, sink=sink)
        self._env._sinks.append(node)
        return DataStreamSink(node)

    def add_sink(self, sink_func: Sink) -> DataStreamSink:
        """A sparkpoint ``Sink`` is added as ``sink_to`` adds it; PyFlink's ``SinkFunction``
        (a Java class) is refused with the replacement."""
        if isinstance(sink_func, SinkFunction):
            raise JavaFunctionError(
                f"add_sink() got a SinkFunction wrapping the Java class "
                f"{sink_func.sink_func!r}: sparkpoint runs no JVM user code. Use "
                "sink_to() with a sparkpoint Sink: FileSink, SparkWriterSink (any Spark batch "
                "writer: Parquet, JDBC, Delta, ...; docs/spark-writers.md) or print()."
            )
        return self.sink_to(sink_func)

    @overload
    def execute_and_collect(
        self, job_execution_name: str | None = None, limit: None = None
    ) -> CloseableIterator: ...

    @overload
    def execute_and_collect(self, job_execution_name: str | None, limit: int) -> list[Any]: ...

    @overload
    def execute_and_collect(
        self, job_execution_name: str | None = None, *, limit: int
    ) -> list[Any]: ...

    def execute_and_collect(
        self, job_execution_name: str | None = None, limit: int | None = None
    ) -> CloseableIterator | list[Any]:
        """Run the job and return its records (exactly once, after the job finished): an
        iterator, or as PyFlink does when ``limit`` is given, a list of the first ``limit``."""
        sink = CollectSink()
        node = self._add(NodeKind.SINK, "Collect", None, sink=sink)
        self._env._sinks.append(node)
        self._env.execute(job_execution_name or "collect")
        if limit is not None:
            return sink.collected[:limit]
        return CloseableIterator(sink.collected)

    def project(self, *field_indexes: int) -> DataStream:
        """The given fields of each tuple, in the given order (streams of ``Types.TUPLE``)."""
        in_type = self.get_type()
        if not isinstance(in_type, TupleTypeInfo):
            raise TypeError("Only Tuple DataStreams can be projected (declare Types.TUPLE).")
        fields = in_type.get_field_types()
        for i in field_indexes:
            if not 0 <= i < len(fields):
                raise ValueError(f"Field index {i} is out of range for a {len(fields)}-tuple")
        out_type = TupleTypeInfo([fields[i] for i in field_indexes])
        indexes = tuple(field_indexes)
        stream = self.map(lambda value: tuple(value[i] for i in indexes), output_type=out_type)
        return stream.name("Projection")


class KeyedStream(DataStream):
    """A stream partitioned by key: keyed state and timers are available downstream."""

    _is_keyed = True

    class AccumulateType(enum.Enum):
        """The rolling aggregations (PyFlink's ``KeyedStream.AccumulateType``)."""

        MIN = 1
        MAX = 2
        MIN_BY = 3
        MAX_BY = 4
        SUM = 5

    def cache(self) -> DataStream:
        """Refused, as in PyFlink."""
        raise TypeError("Cache for KeyedStream is not supported.")

    def _key_selector(self) -> Any:
        return self._node.key_selector

    def get_key_selector(self) -> Any:
        return self._node.key_selector

    # As in PyFlink, a keyed stream's partitioning is its key.
    def _partitioning(self) -> DataStream:
        raise TypeError("Cannot override partitioning for KeyedStream.")

    shuffle = rebalance = rescale = forward = global_ = _partitioning

    def broadcast(  # type: ignore[override]
        self, broadcast_state_descriptor: Any = None, *other_broadcast_state_descriptors: Any
    ) -> DataStream:
        raise TypeError("Cannot override partitioning for KeyedStream.")

    def partition_custom(self, partitioner: Any, key_selector: Any) -> DataStream:
        raise TypeError("Cannot override partitioning for KeyedStream.")

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        if not isinstance(func, (KeyedProcessFunction, ProcessFunction)):
            raise TypeError("process() on a KeyedStream takes a KeyedProcessFunction")
        return self._derive(NodeKind.KEYED_PROCESS, "KeyedProcess", output_type, function=func)

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        fn = _wrap(func, MapFunction, MapFunctionWrapper, "map function")
        return self._derive(
            NodeKind.KEYED_PROCESS, "Map", output_type, function=fn, element_call=_call_map
        )

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        fn = _wrap(func, FlatMapFunction, FlatMapFunctionWrapper, "flat_map function")
        return self._derive(
            NodeKind.KEYED_PROCESS, "FlatMap", output_type, function=fn, element_call=_call_flat_map
        )

    def filter(self, func: Any) -> DataStream:
        fn = _wrap(func, FilterFunction, FilterFunctionWrapper, "filter function")
        return self._derive(
            NodeKind.KEYED_PROCESS,
            "Filter",
            self._node.output_type,
            function=fn,
            element_call=_call_filter,
        )

    def window(self, window_assigner: Any) -> WindowedStream:
        """This stream's records cut into windows per key by ``window_assigner``."""
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        """Windows of ``size`` records per key, every ``slide`` records when given
        (PyFlink's count windows: a window fires once, when full)."""
        if slide == 0:
            return self.window(CountTumblingWindowAssigner(size))
        return self.window(CountSlidingWindowAssigner(size, slide))

    def reduce(self, func: Callable[[Any, Any], Any] | ReduceFunction) -> DataStream:
        fn = _wrap(func, ReduceFunction, ReduceFunctionWrapper, "reduce function")
        return self._derive(NodeKind.REDUCE, "Reduce", self._node.output_type, function=fn)

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        return self._aggregate(position_to_sum, operator.add, "Sum")

    def min(self, position_to_min: int | str = 0) -> DataStream:
        return self._aggregate(position_to_min, min, "Min")

    def max(self, position_to_max: int | str = 0) -> DataStream:
        return self._aggregate(position_to_max, max, "Max")

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        return self._by(position_to_min_by, lambda new, old: new < old, "MinBy")

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        return self._by(position_to_max_by, lambda new, old: new > old, "MaxBy")

    def _aggregate(
        self, field: int | str, combine: Callable[[Any, Any], Any], name: str
    ) -> DataStream:
        def agg(a: Any, b: Any) -> Any:
            return _replace_field(a, field, combine(_get_field(a, field), _get_field(b, field)))

        return self._derive(
            NodeKind.REDUCE, name, self._node.output_type, function=ReduceFunctionWrapper(agg)
        )

    def _by(self, field: int | str, better: Callable[[Any, Any], bool], name: str) -> DataStream:
        def pick(a: Any, b: Any) -> Any:
            return b if better(_get_field(b, field), _get_field(a, field)) else a

        return self._derive(
            NodeKind.REDUCE, name, self._node.output_type, function=ReduceFunctionWrapper(pick)
        )


def _call_map(fn: Any, value: Any, ctx: Any) -> list[Any]:
    return [fn.map(value)]


def _call_flat_map(fn: Any, value: Any, ctx: Any) -> Any:
    return fn.flat_map(value)


def _call_filter(fn: Any, value: Any, ctx: Any) -> list[Any]:
    return [value] if fn.filter(value) else []


def _get_field(value: Any, field: int | str) -> Any:
    if isinstance(value, (int, float)) and field == 0:
        return value
    if isinstance(field, str):
        return value[field] if isinstance(value, dict) else getattr(value, field)
    return value[field]


def _replace_field(value: Any, field: int | str, new: Any) -> Any:
    if isinstance(value, (int, float)) and field == 0:
        return new
    if isinstance(value, Row):
        values = list(value)
        names = value.get_field_names()
        idx = field if isinstance(field, int) else (names or []).index(field)
        values[idx] = new
        out = Row(*values)
        if names:
            out.set_field_names(names)
        out.set_row_kind(value.get_row_kind())
        return out
    if isinstance(value, dict):
        return {**value, field: new}
    if isinstance(value, tuple):
        items = list(value)
        items[field] = new  # type: ignore[index]
        return tuple(items)
    if isinstance(value, list):
        items = list(value)
        items[field] = new  # type: ignore[index]
        return items
    raise TypeError(f"Cannot aggregate field {field!r} of a {type(value).__name__}")


class DataStreamSink:
    """The end of a stream."""

    def __init__(self, node: Node) -> None:
        self._node = node

    def name(self, name: str) -> DataStreamSink:
        self._node.name = name
        return self

    def uid(self, uid: str) -> DataStreamSink:
        self._node.uid = uid
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStreamSink:
        """Like ``uid``: the id checkpointed state of this sink is matched by."""
        return self.uid(uid_hash)

    def set_parallelism(self, parallelism: int) -> DataStreamSink:
        if parallelism < 1:
            raise ValueError("The parallelism of an operator must be at least 1")
        self._node.parallelism = parallelism
        return self

    def disable_chaining(self) -> DataStreamSink:
        return self

    def slot_sharing_group(self, slot_sharing_group: str | SlotSharingGroup) -> DataStreamSink:
        """As ``DataStream.slot_sharing_group``."""
        _set_slot_sharing_group(self._node, slot_sharing_group)
        return self

    def set_description(self, description: str) -> DataStreamSink:
        """A longer description of the sink, shown in ``get_execution_plan``."""
        self._node.description = _description(description)
        return self


def _description(description: str) -> str:
    if not isinstance(description, str):
        raise TypeError(f"description must be a str, got {type(description).__name__}")
    return description


def _set_slot_sharing_group(node: Node, group: str | SlotSharingGroup) -> None:
    if isinstance(group, SlotSharingGroup):
        node.slot_sharing_group = group.get_name()
        node.slot_resources = group.resources() or None
    elif isinstance(group, str) and group:
        node.slot_sharing_group = group
    else:
        raise TypeError(f"slot_sharing_group takes a name or a SlotSharingGroup, got {group!r}")


class CloseableIterator:
    """The iterator ``execute_and_collect`` returns (usable in ``with``)."""

    def __init__(self, items: list[Any]) -> None:
        self._items = items
        self._it = iter(items)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def close(self) -> None:
        self._it = iter(())

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
