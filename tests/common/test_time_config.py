"""Duration, Time, Configuration and the Flink value parsers."""

from __future__ import annotations

import copy
import datetime

import pytest

from sparkpoint.common.configuration import Configuration, get_with_deprecated
from sparkpoint.common.time import Duration, Time, to_millis
from sparkpoint.config import (
    format_duration_ms,
    parse_bool,
    parse_duration_ms,
    parse_memory_size,
)


def test_duration_factories_and_millis() -> None:
    assert Duration.of_millis(250).to_milliseconds() == 250
    assert Duration.of_seconds(3).to_milliseconds() == 3_000
    assert Duration.of_minutes(2).to_milliseconds() == 120_000
    assert Duration.of_hours(1).to_milliseconds() == 3_600_000
    assert Duration.of_days(1).to_milliseconds() == 86_400_000


def test_duration_comparisons_hash_and_str() -> None:
    assert Duration.of_seconds(1) == Duration.of_millis(1000)
    assert Duration.of_seconds(1) != Duration.of_millis(999)
    assert Duration.of_millis(999) < Duration.of_seconds(1) <= Duration.of_millis(1000)
    assert Duration.of_minutes(1) > Duration.of_seconds(59)
    assert hash(Duration.of_seconds(1)) == hash(Duration.of_millis(1000))
    assert str(Duration.of_minutes(10)) == "10 min"
    assert str(Duration.of_millis(1500)) == "1500 ms"
    assert repr(Duration.of_millis(5)) == "Duration.of_millis(5)"
    assert Duration.of_millis(0).is_zero()
    assert Duration.of_millis(-1).is_negative()
    assert Duration.parse("30 s") == Duration.of_seconds(30)


def test_duration_timedelta_round_trip() -> None:
    d = Duration.of_millis(1234)
    assert d.to_timedelta() == datetime.timedelta(milliseconds=1234)
    assert Duration.from_timedelta(datetime.timedelta(seconds=2, microseconds=999)) == Duration(
        2000
    )


def test_duration_rejects_non_int() -> None:
    with pytest.raises(TypeError, match="whole milliseconds"):
        Duration(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Duration(True)


def test_time_factories() -> None:
    assert Time.milliseconds(7).to_milliseconds() == 7
    assert Time.seconds(2).to_milliseconds() == 2000
    assert Time.minutes(3).to_milliseconds() == 180_000
    assert Time.hours(2).to_milliseconds() == 7_200_000
    assert Time.days(2).to_milliseconds() == 172_800_000
    assert Time.seconds(1) == Time.milliseconds(1000)
    assert Time.seconds(1) < Time.seconds(2)
    assert hash(Time.seconds(1)) == hash(Time.milliseconds(1000))
    assert str(Time.seconds(1)) == "1000 ms"
    assert Time.seconds(1).to_duration() == Duration.of_seconds(1)
    assert Time.seconds(1) != Duration.of_seconds(1)


def test_to_millis_accepts_all_forms() -> None:
    assert to_millis(5) == 5
    assert to_millis(Duration.of_seconds(1)) == 1000
    assert to_millis(Time.minutes(1)) == 60_000
    assert to_millis(datetime.timedelta(seconds=1)) == 1000
    with pytest.raises(TypeError, match="interval must be a Duration"):
        to_millis("10s", what="interval")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_millis(True)


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("10 min", 600_000),
        ("10min", 600_000),
        ("10 m", 600_000),
        ("30s", 30_000),
        ("30 sec", 30_000),
        ("30 seconds", 30_000),
        ("500 ms", 500),
        ("500", 500),
        ("1h", 3_600_000),
        ("2 hours", 7_200_000),
        ("1 d", 86_400_000),
        ("1500 us", 1),
        ("2000000 ns", 2),
        (" 7 MS ", 7),
        (42, 42),
    ],
)
def test_parse_duration(text: str, millis: int) -> None:
    assert parse_duration_ms(text) == millis


@pytest.mark.parametrize("text", ["", "ten min", "10 fortnights", "-5 s", "1.5 s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Could not parse value"):
        parse_duration_ms(text, key="execution.checkpointing.interval")


def test_parse_duration_error_names_key_and_units() -> None:
    with pytest.raises(ValueError) as info:
        parse_duration_ms("3 weeks", key="execution.checkpointing.timeout")
    message = str(info.value)
    assert "'execution.checkpointing.timeout'" in message
    assert "'weeks'" in message and "min" in message


def test_format_duration() -> None:
    assert format_duration_ms(600_000) == "10 min"
    assert format_duration_ms(3_600_000) == "1 h"
    assert format_duration_ms(86_400_000) == "1 d"
    assert format_duration_ms(30_000) == "30 s"
    assert format_duration_ms(250) == "250 ms"
    assert format_duration_ms(0) == "0 ms"
    for ms in (0, 1, 999, 1000, 61_000, 600_000, 7_200_000):
        assert parse_duration_ms(format_duration_ms(ms)) == ms


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("20kb", 20 * 1024),
        ("20 kb", 20 * 1024),
        ("4 KiB", 4096),
        ("4k", 4096),
        ("1mb", 1 << 20),
        ("1 MiB", 1 << 20),
        ("2g", 2 << 30),
        ("1 tb", 1 << 40),
        ("123", 123),
        ("123 bytes", 123),
        ("7b", 7),
        (5, 5),
    ],
)
def test_parse_memory_size(text: str, size: int) -> None:
    assert parse_memory_size(text) == size


@pytest.mark.parametrize("text", ["", "kb", "20 parsecs", "1.5mb"])
def test_parse_memory_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="memory size"):
        parse_memory_size(text, key="execution.checkpointing.data-inline-threshold")


def test_parse_bool() -> None:
    assert parse_bool("true") is True
    assert parse_bool("FALSE") is False
    assert parse_bool(True) is True
    with pytest.raises(ValueError, match="'true' or 'false'"):
        parse_bool("yes", key="k")


def test_configuration_typed_accessors() -> None:
    conf = Configuration()
    assert conf.set_string("a", "x") is conf
    conf.set_integer("i", 42).set_boolean("b", True).set_float("f", 1.5)
    assert conf.get_string("a", "d") == "x"
    assert conf.get_string("missing", "d") == "d"
    assert conf.get_integer("i", 0) == 42
    assert conf.get_integer("missing", 7) == 7
    assert conf.get_boolean("b", False) is True
    assert conf.get_boolean("missing", True) is True
    assert conf.get_float("f", 0.0) == 1.5
    assert conf.to_dict() == {"a": "x", "i": "42", "b": "true", "f": "1.5"}
    assert conf["b"] == "true"
    assert sorted(conf.keys()) == ["a", "b", "f", "i"]
    assert conf.key_set() == {"a", "b", "f", "i"}
    assert conf.contains_key("a") and not conf.contains_key("zzz")
    assert len(conf) == 4


def test_configuration_parse_errors_name_key() -> None:
    conf = Configuration({"n": "abc", "b": "maybe", "f": "x"})
    with pytest.raises(ValueError, match="'abc' for 'n': expected an integer"):
        conf.get_integer("n", 0)
    with pytest.raises(ValueError, match="'maybe' for 'b': expected 'true' or 'false'"):
        conf.get_boolean("b", False)
    with pytest.raises(ValueError, match="'x' for 'f': expected a number"):
        conf.get_float("f", 0.0)


def test_configuration_durations_and_sizes() -> None:
    conf = Configuration({"t": "10 min", "s": "20kb"})
    assert conf.get_duration_millis("t", 0) == 600_000
    assert conf.get_duration_millis("missing", 5) == 5
    assert conf.get_memory_size("s", 0) == 20 * 1024
    assert conf.get_memory_size("missing", 9) == 9


def test_configuration_add_remove_copy_equality() -> None:
    a = Configuration().set_string("x", "1")
    b = Configuration()
    b.add_all(a)
    b.add_all({"y": True}, prefix="p.")
    assert b.to_dict() == {"x": "1", "p.y": "true"}
    target: dict[str, str] = {}
    b.add_all_to_dict(target)
    assert target == {"x": "1", "p.y": "true"}
    assert b.remove_config("x") is True
    assert b.remove_config("x") is False
    c = copy.deepcopy(b)
    assert c == b and c is not b
    c.set_string("z", "2")
    assert c != b
    assert hash(Configuration({"k": "v"})) == hash(Configuration({"k": "v"}))
    assert Configuration(a) == a


def test_get_with_deprecated_prefers_new_key() -> None:
    conf = Configuration(
        {"state.checkpoints.num-retained": "3", "execution.checkpointing.num-retained": "5"}
    )
    assert (
        conf.get_with_deprecated(
            "execution.checkpointing.num-retained", "state.checkpoints.num-retained"
        )
        == "5"
    )
    conf.remove_config("execution.checkpointing.num-retained")
    assert (
        conf.get_with_deprecated(
            "execution.checkpointing.num-retained", "state.checkpoints.num-retained"
        )
        == "3"
    )
    assert get_with_deprecated({}, "a", "b", default="d") == "d"
    assert get_with_deprecated({"b": False}, "a", "b") == "false"
