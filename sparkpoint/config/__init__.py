"""Every configuration option sparkpoint reads, with one parser per type of value.

The bottom layer: it imports nothing from sparkpoint but ``sparkpoint.errors``. Options
are grouped as Flink groups them (``CheckpointingOptions``, ``StateBackendOptions``, ...);
``docs/configuration.md`` is generated from them (``python -m sparkpoint.config.docs``).
"""

from sparkpoint.config.checkpointing import CheckpointingOptions
from sparkpoint.config.dashboard import DashboardOptions
from sparkpoint.config.engine import SparkpointOptions
from sparkpoint.config.execution import (
    CoreOptions,
    ExecutionOptions,
    PipelineOptions,
    StateRecoveryOptions,
)
from sparkpoint.config.filesystem import FileSystemOptions
from sparkpoint.config.metrics import MetricOptions
from sparkpoint.config.option import (
    BOOLEAN,
    DURATION,
    LIST,
    MAP,
    MEMORY_SIZE,
    PATH,
    STRING,
    ConfigOption,
    OptionGroup,
    OptionType,
    apply_options,
    duration_type,
    enum_type,
    float_type,
    int_type,
)
from sparkpoint.config.parsers import (
    format_duration_ms,
    format_memory_size,
    format_value,
    invalid_value,
    parse_bool,
    parse_bounded_duration_ms,
    parse_duration_ms,
    parse_enum,
    parse_enum_member,
    parse_float,
    parse_int,
    parse_list,
    parse_map,
    parse_memory_size,
    parse_string,
)
from sparkpoint.config.rest import RestOptions
from sparkpoint.config.restart import INFINITE_ATTEMPTS, RestartStrategyOptions
from sparkpoint.config.snapshot import SnapshotOptions
from sparkpoint.config.state_backend import RocksDBOptions, StateBackendOptions
from sparkpoint.config.table import (
    OPTION_GROUPS,
    OWNED_PREFIXES,
    all_options,
    closest_key,
    find_option,
    validate,
    validate_entry,
)

__all__ = [
    "BOOLEAN",
    "DURATION",
    "INFINITE_ATTEMPTS",
    "LIST",
    "MAP",
    "MEMORY_SIZE",
    "OPTION_GROUPS",
    "OWNED_PREFIXES",
    "PATH",
    "STRING",
    "CheckpointingOptions",
    "ConfigOption",
    "CoreOptions",
    "DashboardOptions",
    "ExecutionOptions",
    "FileSystemOptions",
    "MetricOptions",
    "OptionGroup",
    "OptionType",
    "PipelineOptions",
    "RestOptions",
    "RestartStrategyOptions",
    "RocksDBOptions",
    "SnapshotOptions",
    "SparkpointOptions",
    "StateBackendOptions",
    "StateRecoveryOptions",
    "all_options",
    "apply_options",
    "closest_key",
    "duration_type",
    "enum_type",
    "find_option",
    "float_type",
    "format_duration_ms",
    "format_memory_size",
    "format_value",
    "int_type",
    "invalid_value",
    "parse_bool",
    "parse_bounded_duration_ms",
    "parse_duration_ms",
    "parse_enum",
    "parse_enum_member",
    "parse_float",
    "parse_int",
    "parse_list",
    "parse_map",
    "parse_memory_size",
    "parse_string",
    "validate",
    "validate_entry",
]
