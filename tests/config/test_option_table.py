"""The option table: every key sparkpoint reads is declared once, with a valid default."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

import sparkpoint
from sparkpoint.config import (
    OPTION_GROUPS,
    CheckpointingOptions,
    ConfigOption,
    all_options,
    find_option,
    validate,
)
from sparkpoint.errors import ConfigurationError

_PACKAGE = pathlib.Path(sparkpoint.__file__).parent
_KEY_LITERAL = re.compile(
    r"""["']((?:execution|state|restart-strategy|parallelism|pipeline|sparkpoint|s3|gs|hdfs)"""
    r"""\.[a-z0-9.-]+)["']"""
)
# Dotted string literals that are not configuration keys (logger names, a metadata key).
_NOT_KEYS = {
    "sparkpoint.job",
    "sparkpoint.task",
    "sparkpoint.checkpoint",
    "sparkpoint.pickled",
    "sparkpoint.checkpoint-stats",
    "sparkpoint.key-hash",
    "sparkpoint.kafka",
    "sparkpoint.kafka.client",
    "sparkpoint.skip-deleted-records",  # a KafkaSource property, not a job option
    "sparkpoint.datastream.window",  # a module path (the pickled TimeWindow's)
}  # logger and master-state names


def test_keys_are_unique_across_the_table() -> None:
    keys = [key for option in all_options() for key in option.all_keys]
    assert len(keys) == len(set(keys))
    assert len({group.TITLE for group in OPTION_GROUPS}) == len(OPTION_GROUPS)


@pytest.mark.parametrize("option", all_options(), ids=lambda o: o.key)
def test_each_option_is_documented_and_its_default_round_trips(option: ConfigOption[Any]) -> None:
    assert option.description.endswith(".") and len(option.description) > 20
    assert find_option(option.key) is option
    for old in option.deprecated_keys:
        assert find_option(old) is option
    if option.default is not None:
        assert option.parse(option.format(option.default)) == option.default


def test_every_key_read_in_the_code_is_in_the_table() -> None:
    found = set()
    for path in _PACKAGE.rglob("*.py"):
        if "config" in path.relative_to(_PACKAGE).parts[:1]:
            continue
        found |= set(_KEY_LITERAL.findall(path.read_text(encoding="utf-8")))
    missing = sorted(key for key in found - _NOT_KEYS if find_option(key) is None)
    assert missing == []


def test_deprecated_key_is_read_when_the_key_is_unset() -> None:
    option = CheckpointingOptions.MAX_RETAINED_CHECKPOINTS
    assert option.read({"state.checkpoints.num-retained": "3"}) == 3
    assert (
        option.read(
            {"state.checkpoints.num-retained": "3", "execution.checkpointing.num-retained": "5"}
        )
        == 5
    )
    assert option.read({}) == 1


def test_validate_checks_known_keys_only() -> None:
    validate({"my.own.key": "anything", "execution.checkpointing.timeout": "1 min"})
    with pytest.raises(ConfigurationError, match=r"'soon' for 'state\.checkpoints\.num-retained'"):
        validate({"state.checkpoints.num-retained": "soon"})
