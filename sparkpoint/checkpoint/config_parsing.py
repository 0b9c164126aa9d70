"""Pure parsers for Flink configuration values: durations ("10 min") and memory sizes ("20kb").

No imports from sparkpoint: both ``checkpoint/`` (storage options) and ``common/``
(``Configuration``) use them.
"""

from __future__ import annotations

import re

__all__ = [
    "format_duration_ms",
    "parse_bool",
    "parse_duration_ms",
    "parse_memory_size",
]

_NUMBER_AND_UNIT = re.compile(r"^\s*([0-9]+)\s*([a-zA-Zµ]*)\s*$")

# Flink's TimeUtils.TimeUnit labels, expressed as nanoseconds per unit.
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

# Flink's MemorySize.MemoryUnit labels (binary multiples), plus the IEC spellings.
_MEMORY_TABLE: tuple[tuple[tuple[str, ...], int], ...] = (
    (("b", "bytes"), 1),
    (("k", "kb", "kib", "kibibytes"), 1 << 10),
    (("m", "mb", "mib", "mebibytes"), 1 << 20),
    (("g", "gb", "gib", "gibibytes"), 1 << 30),
    (("t", "tb", "tib", "tebibytes"), 1 << 40),
)
_MEMORY_UNITS = {label: size for labels, size in _MEMORY_TABLE for label in labels}


def parse_duration_ms(text: str | int, *, key: str | None = None) -> int:
    """Milliseconds of a Flink duration string ("10 min", "30s", "500 ms", "1h"; bare = ms)."""
    if isinstance(text, bool):
        raise ValueError(_bad(key, text, "a duration such as '10 min', '30 s' or '500 ms'"))
    if isinstance(text, int):
        return text
    match = _NUMBER_AND_UNIT.match(text)
    if match is None:
        raise ValueError(_bad(key, text, "a duration such as '10 min', '30 s' or '500 ms'"))
    number, unit = int(match.group(1)), match.group(2).lower()
    if not unit:
        return number
    nanos = _DURATION_UNITS.get(unit)
    if nanos is None:
        labels = ", ".join(sorted(_DURATION_UNITS))
        raise ValueError(
            _bad(key, text, f"a duration; time unit {unit!r} is not one of: {labels}")
        )
    return number * nanos // 10**6


def format_duration_ms(millis: int) -> str:
    """The shortest exact Flink spelling of ``millis`` ("10 min", "30 s", "250 ms")."""
    for label, unit_ms in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if millis and millis % unit_ms == 0:
            return f"{millis // unit_ms} {label}"
    return f"{millis} ms"


def parse_memory_size(text: str | int, *, key: str | None = None) -> int:
    """Bytes of a Flink memory size ("20kb", "4 KiB", "1mb"; bare = bytes; binary multiples)."""
    if isinstance(text, bool):
        raise ValueError(_bad(key, text, "a memory size such as '20 kb' or '1 mb'"))
    if isinstance(text, int):
        return text
    match = _NUMBER_AND_UNIT.match(text)
    if match is None:
        raise ValueError(_bad(key, text, "a memory size such as '20 kb' or '1 mb'"))
    number, unit = int(match.group(1)), match.group(2).lower()
    if not unit:
        return number
    multiplier = _MEMORY_UNITS.get(unit)
    if multiplier is None:
        labels = ", ".join(sorted(_MEMORY_UNITS))
        raise ValueError(
            _bad(key, text, f"a memory size; unit {unit!r} is not one of: {labels}")
        )
    return number * multiplier


def parse_bool(text: str | bool, *, key: str | None = None) -> bool:
    """``True``/``False`` from Flink's boolean spellings ("true"/"false", any case)."""
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError(_bad(key, text, "'true' or 'false'"))


def _bad(key: str | None, value: object, expected: str) -> str:
    where = f" for {key!r}" if key else ""
    return f"Could not parse value {value!r}{where}: expected {expected}"
