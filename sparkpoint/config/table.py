"""The option table: every option group, lookup by key, and validation of a whole mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
from sparkpoint.config.option import ConfigOption, OptionGroup
from sparkpoint.config.restart import RestartStrategyOptions
from sparkpoint.config.state_backend import RocksDBOptions, StateBackendOptions

__all__ = ["OPTION_GROUPS", "all_options", "find_option", "validate", "validate_entry"]

OPTION_GROUPS: tuple[type[OptionGroup], ...] = (
    CoreOptions,
    PipelineOptions,
    ExecutionOptions,
    CheckpointingOptions,
    StateRecoveryOptions,
    RestartStrategyOptions,
    StateBackendOptions,
    RocksDBOptions,
    SparkpointOptions,
    DashboardOptions,
    FileSystemOptions,
)
"""Every option group, in the order of ``docs/configuration.md``."""


def all_options() -> tuple[ConfigOption[Any], ...]:
    """Every option sparkpoint reads."""
    return tuple(option for group in OPTION_GROUPS for option in group.all_options())


_BY_KEY: dict[str, ConfigOption[Any]] = {
    key: option for option in all_options() for key in option.all_keys
}


def find_option(key: str) -> ConfigOption[Any] | None:
    """The option read under ``key`` (its current or a deprecated key), if any."""
    return _BY_KEY.get(key)


def validate_entry(key: str, value: object) -> None:
    """Raise ``ConfigurationError`` if ``key`` is a known option and ``value`` is not valid."""
    option = _BY_KEY.get(key)
    if option is not None and value is not None:
        option.parse(value, key)


def validate(config: Mapping[str, object]) -> None:
    """``validate_entry`` for every entry of ``config`` (unknown keys pass untouched)."""
    for key, value in config.items():
        validate_entry(key, value)
