"""Flink value parsers (durations, memory sizes, booleans) under ``sparkpoint.common``.

They live in ``sparkpoint.checkpoint.config_parsing`` so that lower layers can use them.
"""

from sparkpoint.checkpoint.config_parsing import (
    format_duration_ms,
    parse_bool,
    parse_duration_ms,
    parse_memory_size,
)

__all__ = ["format_duration_ms", "parse_bool", "parse_duration_ms", "parse_memory_size"]
