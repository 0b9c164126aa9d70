"""One parser per kind of configuration value, as Flink spells values; and their writers.

Each parser takes the raw value (the string a ``Configuration`` holds, or the Python value
itself) and the key it was set under, and raises ``ConfigurationError`` naming the key, the
value and what is allowed.
"""

from __future__ import annotations

import datetime
import enum
import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from sparkpoint.errors import ConfigurationError

__all__ = [
    "format_duration_ms",
    "format_list",
    "format_map",
    "format_memory_size",
    "format_value",
    "invalid_value",
    "parse_bool",
    "parse_duration_ms",
    "parse_enum",
    "parse_enum_member",
    "parse_float",
    "parse_int",
    "parse_list",
    "parse_map",
    "parse_memory_size",
    "parse_string",
]

E = TypeVar("E", bound=enum.Enum)

_NUMBER_AND_UNIT = re.compile(r"^\s*([0-9]+)\s*([a-zA-Zµ]*)\s*$")

# Flink's TimeUtils units, as nanoseconds per unit.
_DURATION_TABLE: tuple[tuple[tuple[str, ...], int], ...] = (
    (("d", "day", "days"), 86_400 * 10**9),
    (("h", "hour", "hours"), 3_600 * 10**9),
    (("m", "min", "minute", "minutes"), 60 * 10**9),
    (("s", "sec", "secs", "second", "seconds"), 10**9),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 10**6),
    (("µs", "us", "micro", "micros", "microsecond", "microseconds"), 10**3),
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
)
_DURATION_UNITS = {label: nanos for labels, nanos in _DURATION_TABLE for label in labels}
_DURATION_ALLOWED = "a duration such as '10 min', '30 s' or '500 ms' (bare numbers are ms)"

# Flink's MemorySize units (binary multiples), plus the IEC spellings.
_MEMORY_TABLE: tuple[tuple[tuple[str, ...], int], ...] = (
    (("b", "bytes"), 1),
    (("k", "kb", "kib", "kibibytes"), 1 << 10),
    (("m", "mb", "mib", "mebibytes"), 1 << 20),
    (("g", "gb", "gib", "gibibytes"), 1 << 30),
    (("t", "tb", "tib", "tebibytes"), 1 << 40),
)
_MEMORY_UNITS = {label: size for labels, size in _MEMORY_TABLE for label in labels}
_MEMORY_ALLOWED = "a memory size such as '20 kb', '4 KiB' or '1 mb' (bare numbers are bytes)"


def invalid_value(key: str | None, value: object, allowed: str) -> ConfigurationError:
    """The error for ``value`` set under ``key``, saying what ``allowed`` values are."""
    where = f" for {key!r}" if key else ""
    return ConfigurationError(f"Could not parse value {value!r}{where}: expected {allowed}")


def _scaled(
    value: str | object, key: str | None, allowed: str, units: Mapping[str, int]
) -> tuple[int, int | None]:
    """(number, size of its unit) of "<number> [unit]" text; ``None`` for a bare number."""
    match = _NUMBER_AND_UNIT.match(value) if isinstance(value, str) else None
    if match is None:
        raise invalid_value(key, value, allowed)
    number, unit = int(match.group(1)), match.group(2).lower()
    if not unit:
        return number, None
    if unit not in units:
        what = allowed.partition(" such as")[0]
        labels = ", ".join(sorted(units))
        raise invalid_value(key, value, f"{what}; unit {unit!r} is not one of: {labels}")
    return number, units[unit]


def _with_largest_unit(amount: int, units: tuple[tuple[str, int], ...], smallest: str) -> str:
    """``amount`` in the largest of ``units`` that divides it exactly, else in ``smallest``."""
    for label, size in units:
        if amount and amount % size == 0:
            return f"{amount // size} {label}"
    return f"{amount} {smallest}"


def parse_duration_ms(value: object, key: str | None = None) -> int:
    """Milliseconds of a duration: "10 min", "30s", "1h", bare ms, an int, a ``timedelta``."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    to_millis = getattr(value, "to_milliseconds", None)  # Duration, Time
    if callable(to_millis):
        return int(to_millis())
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number, nanos = _scaled(value, key, _DURATION_ALLOWED, _DURATION_UNITS)
    return number if nanos is None else number * nanos // 10**6


def parse_bounded_duration_ms(
    value: object, key: str | None = None, *, minimum: int, or_zero: bool = False
) -> int:
    """Milliseconds of a duration of at least ``minimum`` ms (or exactly 0 when ``or_zero``)."""
    millis = parse_duration_ms(value, key)
    if millis < minimum and not (or_zero and millis == 0):
        least = format_duration_ms(minimum)
        allowed = (
            f"0 or a duration of at least {least}" if or_zero else f"a duration of at least {least}"
        )
        raise invalid_value(key, value, allowed)
    return millis


def format_duration_ms(millis: int) -> str:
    """The shortest exact Flink spelling of ``millis`` ("10 min", "30 s", "250 ms")."""
    units = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000))
    return _with_largest_unit(millis, units, "ms")


def parse_memory_size(value: object, key: str | None = None) -> int:
    """Bytes of a memory size: "20kb", "4 KiB", "1mb", bare bytes or an int."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number, size = _scaled(value, key, _MEMORY_ALLOWED, _MEMORY_UNITS)
    return number if size is None else number * size


def format_memory_size(size: int) -> str:
    """The shortest exact Flink spelling of ``size`` bytes ("20 kb", "1 mb", "100 bytes")."""
    units = (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10))
    return _with_largest_unit(size, units, "bytes")


def parse_bool(value: object, key: str | None = None) -> bool:
    """Flink's rule: "true" or "false" in any case (or a ``bool``); nothing else."""
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower() if isinstance(value, str) else None
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise invalid_value(key, value, "'true' or 'false'")


def _bounds(what: str, minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{what} between {minimum} and {maximum}"
    if minimum is not None:
        return f"{what} >= {minimum}"
    if maximum is not None:
        return f"{what} <= {maximum}"
    return what


def _outside(number: float, minimum: float | None, maximum: float | None) -> bool:
    return (minimum is not None and number < minimum) or (maximum is not None and number > maximum)


def parse_int(
    value: object,
    key: str | None = None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """A decimal integer, optionally within ``[minimum, maximum]``."""
    allowed = _bounds("an integer", minimum, maximum)
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        number = int(value)
    else:
        raise invalid_value(key, value, allowed)
    if _outside(number, minimum, maximum):
        raise invalid_value(key, value, allowed)
    return number


def parse_float(
    value: object,
    key: str | None = None,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> float:
    """A number, optionally within ``[minimum, maximum]`` and greater than ``above``."""
    allowed = _bounds("a number", minimum, maximum)
    if above is not None:
        allowed = f"a number above {above}" + allowed[len("a number") :]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise invalid_value(key, value, allowed)
    try:
        number = float(value)
    except ValueError:
        raise invalid_value(key, value, allowed) from None
    if number != number or _outside(number, minimum, maximum):  # NaN is not a number here
        raise invalid_value(key, value, allowed)
    if above is not None and not number > above:
        raise invalid_value(key, value, allowed)
    return number


def _enum_form(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def parse_enum(
    value: object,
    choices: Iterable[str],
    key: str | None = None,
    aliases: Mapping[str, str] | None = None,
) -> str:
    """The choice ``value`` names (any case, ``-`` or ``_``; an enum member by its name)."""
    choices = tuple(choices)
    name = value.name if isinstance(value, enum.Enum) else value
    if isinstance(name, str):
        wanted = _enum_form(name)
        for choice in choices:
            if _enum_form(choice) == wanted:
                return choice
        for alias, choice in (aliases or {}).items():
            if _enum_form(alias) == wanted:
                return choice
    raise invalid_value(key, value, "one of " + ", ".join(choices))


def parse_enum_member(value: object, members: type[E], key: str | None = None) -> E:
    """The member of ``members`` named by ``value``: a member (of any enum) or name as
    ``parse_enum`` reads it, or the member's int value (PyFlink 1.x int constants)."""
    if isinstance(value, members):
        return value
    if isinstance(value, int) and not isinstance(value, (bool, enum.Enum)):
        for member in members:
            if member.value == value:
                return member
    return members[parse_enum(value, [m.name for m in members], key)]


def parse_string(value: object, key: str | None = None) -> str:
    """Any string (a non-string value is written with ``format_value``)."""
    return value if isinstance(value, str) else format_value(value)


def parse_list(value: object, key: str | None = None) -> list[str]:
    """A list as Flink spells it: items separated by ';' (or a Python list/tuple)."""
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    if not isinstance(value, str):
        raise invalid_value(key, value, "a list such as 'a;b;c'")
    return [item.strip() for item in value.split(";") if item.strip()]


def format_list(items: Iterable[object]) -> str:
    """Flink's spelling of a list ("a;b;c")."""
    return ";".join(str(item) for item in items)


def parse_map(value: object, key: str | None = None) -> dict[str, str]:
    """A map as Flink spells it: "k1:v1,k2:v2" (or a Python mapping)."""
    if isinstance(value, Mapping):
        return {str(k): format_value(v) for k, v in value.items()}
    allowed = "a map such as 'k1:v1,k2:v2'"
    if not isinstance(value, str):
        raise invalid_value(key, value, allowed)
    out: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in value.split(","))):
        name, sep, item = entry.partition(":")
        if not sep or not name.strip():
            raise invalid_value(key, value, allowed)
        out[name.strip()] = item.strip()
    return out


def format_map(entries: Mapping[str, object]) -> str:
    """Flink's spelling of a map ("k1:v1,k2:v2")."""
    return ",".join(f"{k}:{format_value(v)}" for k, v in entries.items())


def format_value(value: object) -> str:
    """Flink's string form of a plain value: booleans lower-case, enum members by name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.name if isinstance(value, enum.Enum) else str(value)
