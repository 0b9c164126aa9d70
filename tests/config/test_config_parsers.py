"""One parser per type of configuration value: what each accepts, and the error it raises."""

from __future__ import annotations

import datetime
import enum

import pytest

from sparkpoint.config import (
    format_memory_size,
    parse_bool,
    parse_duration_ms,
    parse_enum,
    parse_enum_member,
    parse_float,
    parse_int,
    parse_list,
    parse_map,
    parse_memory_size,
)
from sparkpoint.errors import ConfigurationError


def test_errors_are_configuration_errors_and_value_errors() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_int("abc", "parallelism.default", minimum=1)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        "Could not parse value 'abc' for 'parallelism.default': expected an integer >= 1"
    )


def test_duration_accepts_timedelta_and_time_objects() -> None:
    assert parse_duration_ms(datetime.timedelta(seconds=3)) == 3000
    assert parse_duration_ms("2 min", "k") == 120_000
    with pytest.raises(ConfigurationError, match=r"'2 fortnights' for 'k'.*'fortnights'"):
        parse_duration_ms("2 fortnights", "k")
    with pytest.raises(ConfigurationError, match="True for 'k'"):
        parse_duration_ms(True, "k")


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 bytes"),
        (100, "100 bytes"),
        (4096, "4 kb"),
        (20480, "20 kb"),
        (1 << 20, "1 mb"),
        (3 << 30, "3 gb"),
        (1 << 40, "1 tb"),
        (1500, "1500 bytes"),
    ],
)
def test_memory_size_writer_round_trips(size: int, text: str) -> None:
    assert format_memory_size(size) == text
    assert parse_memory_size(text) == size


def test_one_memory_unit_table() -> None:
    # The units both former parsers knew (KiB spellings from one, 'tebibytes' from neither).
    for text in ("1 kibibytes", "1kib", "1 KB", "1k"):
        assert parse_memory_size(text) == 1024
    assert parse_memory_size("1 tebibytes") == 1 << 40


@pytest.mark.parametrize("text", ["yes", "no", "1", "0", "on", "", "truee"])
def test_boolean_follows_flinks_rule(text: str) -> None:
    """Only "true"/"false" in any case: the spellings the RocksDB parser used to accept
    (yes/no/1/0) are refused, as Flink refuses them."""
    with pytest.raises(ConfigurationError, match=f"{text!r} for 'b': expected 'true' or 'false'"):
        parse_bool(text, "b")
    assert parse_bool(" TRUE ") is True and parse_bool("False") is False


def test_int_bounds() -> None:
    assert parse_int(" 7 ", "k") == 7 and parse_int(-3, "k") == -3
    with pytest.raises(ConfigurationError, match="expected an integer between 1 and 32767"):
        parse_int("32768", "k", minimum=1, maximum=32767)
    with pytest.raises(ConfigurationError, match="expected an integer <= 5"):
        parse_int(6, "k", maximum=5)
    for bad in ("1.5", "", True, 2.0, "0x10"):
        with pytest.raises(ConfigurationError, match="expected an integer"):
            parse_int(bad, "k")


def test_float_bounds() -> None:
    assert parse_float("1.5", "k") == 1.5 and parse_float(2, "k") == 2.0
    with pytest.raises(ConfigurationError, match=r"expected a number between 0\.0 and 1\.0"):
        parse_float("1.5", "k", minimum=0.0, maximum=1.0)
    for bad in ("nan", "x", False):
        with pytest.raises(ConfigurationError, match="expected a number"):
            parse_float(bad, "k")


class Color(enum.IntEnum):
    RED_ONE = 0
    BLUE = 1


def test_enum_names_any_case_dash_or_underscore_and_aliases() -> None:
    choices = ("fixed-delay", "none")
    assert parse_enum("FIXED_DELAY", choices) == "fixed-delay"
    assert parse_enum("off", choices, aliases={"off": "none"}) == "none"
    with pytest.raises(
        ConfigurationError, match="'sometimes' for 'k': expected one of fixed-delay, none"
    ):
        parse_enum("sometimes", choices, "k")
    assert parse_enum_member("red-one", Color) is Color.RED_ONE
    assert parse_enum_member(1, Color) is Color.BLUE
    assert parse_enum_member(Color.BLUE, Color) is Color.BLUE
    with pytest.raises(ConfigurationError, match="7 for 'Color': expected one of RED_ONE, BLUE"):
        parse_enum_member(7, Color, "Color")


def test_list_and_map_as_flink_spells_them() -> None:
    assert parse_list("a; b;;c") == ["a", "b", "c"]
    assert parse_list(("x", 1)) == ["x", "1"]
    assert parse_map("k1:v1, k2:v:2") == {"k1": "v1", "k2": "v:2"}
    assert parse_map({"n": 5, "b": True}) == {"n": "5", "b": "true"}
    with pytest.raises(ConfigurationError, match="'k1=v1' for 'm': expected a map"):
        parse_map("k1=v1", "m")
    with pytest.raises(ConfigurationError, match="expected a list"):
        parse_list(5, "l")
