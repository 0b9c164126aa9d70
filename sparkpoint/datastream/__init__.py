"""The DataStream API, as ``pyflink.datastream`` spells it."""

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
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
)
from sparkpoint.datastream.output_tag import OutputTag
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

__all__ = [
    "AggregateFunction",
    "CheckpointConfig",
    "CheckpointStorage",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
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
    "HashMapStateBackend",
    "JobManagerCheckpointStorage",
    "KeySelector",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "MemoryStateBackend",
    "OutputTag",
    "PredefinedOptions",
    "ProcessFunction",
    "ReduceFunction",
    "RocksDBStateBackend",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "StateBackend",
    "StreamExecutionEnvironment",
    "TimeCharacteristic",
    "TimeDomain",
    "TimerService",
]
