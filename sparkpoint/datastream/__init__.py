"""The DataStream API, as ``pyflink.datastream`` spells it."""

from sparkpoint.datastream.async_data_stream import AsyncDataStream
from sparkpoint.datastream.async_functions import (
    AsyncFunction,
    AsyncRetryPredicate,
    AsyncRetryStrategies,
    AsyncRetryStrategy,
)
from sparkpoint.datastream.broadcast_functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from sparkpoint.datastream.broadcast_stream import BroadcastConnectedStream, BroadcastStream
from sparkpoint.datastream.checkpoint_config import CheckpointConfig
from sparkpoint.datastream.checkpoint_storage import (
    CheckpointStorage,
    CustomCheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)
from sparkpoint.datastream.checkpointing_mode import CheckpointingMode
from sparkpoint.datastream.connected_streams import ConnectedStreams
from sparkpoint.datastream.data_stream import DataStream, DataStreamSink, KeyedStream
from sparkpoint.datastream.externalized_checkpoint_retention import (
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
)
from sparkpoint.datastream.functions import (
    AggregateFunction,
    AllWindowFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    WindowFunction,
)
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.slot_sharing_group import MemorySize, SlotSharingGroup
from sparkpoint.datastream.state_backend import (
    CustomStateBackend,
    EmbeddedRocksDBStateBackend,
    FsStateBackend,
    HashMapStateBackend,
    MemoryStateBackend,
    PredefinedOptions,
    RocksDBStateBackend,
    StateBackend,
)
from sparkpoint.datastream.stream_execution_environment import (
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from sparkpoint.datastream.time_characteristic import TimeCharacteristic
from sparkpoint.datastream.time_domain import TimeDomain
from sparkpoint.datastream.timerservice import TimerService
from sparkpoint.datastream.window import (
    CountWindow,
    GlobalWindow,
    MergingWindowAssigner,
    TimeWindow,
    Trigger,
    TriggerResult,
    Window,
    WindowAssigner,
)
from sparkpoint.datastream.windowed_stream import AllWindowedStream, WindowedStream

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "AllWindowedStream",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategies",
    "AsyncRetryStrategy",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "CheckpointConfig",
    "CheckpointStorage",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "CountWindow",
    "CustomCheckpointStorage",
    "CustomStateBackend",
    "DataStream",
    "DataStreamSink",
    "EmbeddedRocksDBStateBackend",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "FileSystemCheckpointStorage",
    "FilterFunction",
    "FlatMapFunction",
    "FsStateBackend",
    "GlobalWindow",
    "HashMapStateBackend",
    "JobManagerCheckpointStorage",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "MemorySize",
    "MemoryStateBackend",
    "MergingWindowAssigner",
    "OutputTag",
    "Partitioner",
    "PredefinedOptions",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RocksDBStateBackend",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "SlotSharingGroup",
    "SourceFunction",
    "StateBackend",
    "StreamExecutionEnvironment",
    "TimeCharacteristic",
    "TimeDomain",
    "TimeWindow",
    "TimerService",
    "Trigger",
    "TriggerResult",
    "Window",
    "WindowAssigner",
    "WindowFunction",
    "WindowedStream",
]
