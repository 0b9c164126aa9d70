"""The option table: every option group, lookup by key, and validation of a whole mapping
(invalid values raise; unknown keys under the table's prefixes warn with the closest key)."""

from __future__ import annotations

import difflib
import logging
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
from sparkpoint.config.metrics import MetricOptions
from sparkpoint.config.option import ConfigOption, OptionGroup
from sparkpoint.config.rest import RestOptions
from sparkpoint.config.restart import RestartStrategyOptions
from sparkpoint.config.snapshot import SnapshotOptions
from sparkpoint.config.state_backend import RocksDBOptions, StateBackendOptions

__all__ = [
    "OPTION_GROUPS",
    "OWNED_PREFIXES",
    "all_options",
    "closest_key",
    "find_option",
    "validate",
    "validate_entry",
]

_LOG = logging.getLogger(__name__)

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
    SnapshotOptions,
    DashboardOptions,
    RestOptions,
    MetricOptions,
    FileSystemOptions,
)
"""Every option group, in the order of ``docs/configuration.md``."""


def all_options() -> tuple[ConfigOption[Any], ...]:
    """Every option sparkpoint reads."""
    return tuple(option for group in OPTION_GROUPS for option in group.all_options())


_BY_KEY: dict[str, ConfigOption[Any]] = {
    key: option for option in all_options() for key in option.all_keys
}


OWNED_PREFIXES = frozenset(key.split(".", 1)[0] for key in _BY_KEY)
"""First components of the table's keys (``execution``, ``state``, ``sparkpoint``, ...): a key
under one of them that the table does not know is a misspelling or a key sparkpoint ignores."""


def closest_key(key: str) -> str | None:
    """The known key (current or deprecated) closest to ``key``, if any is close."""
    matches = difflib.get_close_matches(key, _BY_KEY, n=1, cutoff=0.6)
    return matches[0] if matches else None


def _warn_unknown(key: str) -> None:
    suggestion = closest_key(key)
    hint = f"; did you mean {suggestion!r}?" if suggestion else ""
    _LOG.warning(
        "Unknown configuration key %r: sparkpoint reads no such key and ignores it%s", key, hint
    )


def find_option(key: str) -> ConfigOption[Any] | None:
    """The option read under ``key`` (its current or a deprecated key), if any."""
    return _BY_KEY.get(key)


def validate_entry(key: str, value: object) -> None:
    """Raise ``ConfigurationError`` if ``key`` is a known option and ``value`` is not valid."""
    option = _BY_KEY.get(key)
    if option is not None and value is not None:
        option.parse(value, key)


def validate(config: Mapping[str, object]) -> None:
    """``validate_entry`` for every entry of ``config``; a key under ``OWNED_PREFIXES`` that
    no option reads logs one warning naming the closest known key (once per call: the
    environment validates a job's configuration once)."""
    for key, value in config.items():
        validate_entry(key, value)
        if key not in _BY_KEY and key.split(".", 1)[0] in OWNED_PREFIXES:
            _warn_unknown(key)
