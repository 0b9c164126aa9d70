"""Issue 29, configuration: an unknown key under the table's prefixes warns with the closest
known key; every range the descriptions (docs/configuration.md) state is enforced when set."""

from __future__ import annotations

import logging

import pytest

from sparkpoint.common import Configuration
from sparkpoint.config import OWNED_PREFIXES, closest_key, find_option, validate
from sparkpoint.errors import ConfigurationError


def test_the_table_owns_the_prefixes_of_its_keys() -> None:
    assert {"execution", "state", "sparkpoint", "pipeline", "restart-strategy"} <= OWNED_PREFIXES
    assert "spark" not in OWNED_PREFIXES


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("state.backend.tpye", "state.backend.type"),
        ("execution.checkpointing.intervall", "execution.checkpointing.interval"),
        ("sparkpoint.epoch.max-record-per-split", "sparkpoint.epoch.max-records-per-split"),
        ("state.checkpoints.dirr", "state.checkpoints.dir"),  # a deprecated key
        ("restart-strategy.fixed-delay.attempt", "restart-strategy.fixed-delay.attempts"),
    ],
)
def test_an_unknown_key_warns_with_the_closest_known_key(
    key: str, suggestion: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert closest_key(key) == suggestion
    with caplog.at_level(logging.WARNING, "sparkpoint.config"):
        validate({key: "1", "execution.checkpointing.mode": "EXACTLY_ONCE"})
    assert [r.getMessage() for r in caplog.records] == [
        f"Unknown configuration key {key!r}: sparkpoint reads no such key and ignores it; "
        f"did you mean {suggestion!r}?"
    ]


def test_known_and_foreign_keys_do_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "sparkpoint.config"):
        validate(
            {
                "state.checkpoints.dir": "/tmp/x",  # deprecated but known
                "spark.executor.memory": "1g",
                "table.exec.state.ttl": "1 h",
                "python.fn-execution.bundle.size": "10",
            }
        )
    assert caplog.records == []


def test_an_unknown_key_without_a_close_match_still_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "sparkpoint.config"):
        validate({"sparkpoint.zzzzzzzz": "1"})
    assert [r.getMessage() for r in caplog.records] == [
        "Unknown configuration key 'sparkpoint.zzzzzzzz': sparkpoint reads no such key and "
        "ignores it"
    ]


def test_the_environment_warns_once_per_key(caplog: pytest.LogCaptureFixture) -> None:
    from sparkpoint.datastream import StreamExecutionEnvironment

    conf = Configuration()
    conf.set_string("state.backend.tpye", "rocksdb")
    with caplog.at_level(logging.WARNING, "sparkpoint.config"):
        StreamExecutionEnvironment.get_execution_environment(conf)
    assert sum("state.backend.tpye" in r.getMessage() for r in caplog.records) == 1


# (key, refused values, the allowed range as the error states it, accepted values)
DOCUMENTED_RANGES = [
    (
        "restart-strategy.exponential-delay.backoff-multiplier",
        ["0.5", "1", "1.0", "-2"],
        "a number above 1.0",
        ["1.5", "2"],
    ),
    (
        "sparkpoint.dashboard.refresh-interval",
        ["0", "0 ms"],
        "a duration of at least 1 ms",
        ["1 ms", "2 s"],
    ),
    (
        "execution.checkpointing.interval",
        ["0", "9 ms"],
        "a duration of at least 10 ms",
        ["10 ms", "1 min"],
    ),
    (
        "execution.checkpointing.interval-during-backlog",
        ["5 ms"],
        "0 or a duration of at least 10 ms",
        ["0", "10 ms"],
    ),
    ("restart-strategy.exponential-delay.jitter-factor", ["-0.1", "1.5"], "between", ["0", "1"]),
    ("sparkpoint.dashboard.port", ["-1", "65536"], "between 0 and 65535", ["0", "8081"]),
    (
        "sparkpoint.state.changelog.materialization.max-upload-rate",
        ["0"],
        "above 0",
        ["8 mb"],
    ),
    ("pipeline.max-parallelism", ["0", "32768"], "between 1 and 32767", ["128"]),
    ("state.backend.rocksdb.files.open", ["-2"], ">= -1", ["-1", "100"]),
    (
        "execution.state-recovery.without-channel-state.checkpoint-id",
        ["-2"],
        ">= -1",
        ["-1"],
    ),
]


@pytest.mark.parametrize(("key", "refused", "allowed", "accepted"), DOCUMENTED_RANGES)
def test_every_documented_range_is_enforced_when_set(
    key: str, refused: list[str], allowed: str, accepted: list[str]
) -> None:
    assert find_option(key) is not None
    for value in refused:
        with pytest.raises(ConfigurationError) as info:
            Configuration().set_string(key, value)
        message = str(info.value)
        assert repr(value) in message and repr(key) in message and allowed in message
    for value in accepted:
        Configuration().set_string(key, value)
