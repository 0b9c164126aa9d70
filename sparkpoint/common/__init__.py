"""Common API classes, as ``pyflink.common`` spells them."""

from sparkpoint.common.configuration import Configuration
from sparkpoint.common.execution_config import ExecutionConfig
from sparkpoint.common.job_status import JobStatus
from sparkpoint.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from sparkpoint.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)
from sparkpoint.common.time import Duration, Time
from sparkpoint.common.typeinfo import TypeInformation, Types
from sparkpoint.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from sparkpoint.types import Row, RowKind

__all__ = [
    "ByteArraySchema",
    "Configuration",
    "DeserializationSchema",
    "Duration",
    "Encoder",
    "ExecutionConfig",
    "JobStatus",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowKind",
    "SerializationSchema",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
]
