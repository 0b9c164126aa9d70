"""Common API classes, as ``pyflink.common`` spells them."""

from typing import Any

from sparkpoint.common.config_options import ConfigOption, ConfigOptions
from sparkpoint.common.configuration import Configuration
from sparkpoint.common.execution_config import ExecutionConfig
from sparkpoint.common.job_id import CompletableFuture, InputDependencyConstraint, JobID
from sparkpoint.common.job_status import JobStatus
from sparkpoint.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from sparkpoint.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)
from sparkpoint.common.time import Duration, Instant, Time
from sparkpoint.common.typeinfo import TypeInformation, Types
from sparkpoint.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from sparkpoint.types import Row, RowKind

__all__ = [
    "ByteArraySchema",
    "CompletableFuture",
    "ConfigOption",
    "ConfigOptions",
    "Configuration",
    "DeserializationSchema",
    "Duration",
    "Encoder",
    "ExecutionConfig",
    "InputDependencyConstraint",
    "Instant",
    "JobClient",
    "JobExecutionResult",
    "JobID",
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


def __getattr__(name: str) -> Any:
    """``JobClient`` and ``JobExecutionResult`` live with the job master (the driver side);
    imported on first use so that importing ``sparkpoint.common`` (workers do) does not
    import the driver, which itself imports ``sparkpoint.common``."""
    if name in ("JobClient", "JobExecutionResult"):
        from sparkpoint.runtime.driver import job_client

        return getattr(job_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
