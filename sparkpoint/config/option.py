"""``ConfigOption``: one configuration key with its old keys, type, default and description.

An option reads itself from any ``Mapping`` of keys (a ``Configuration`` or a dict), trying
its key first and then the deprecated ones, as Flink's ``withDeprecatedKeys`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from sparkpoint.config import parsers

__all__ = [
    "BOOLEAN",
    "DURATION",
    "LIST",
    "MAP",
    "MEMORY_SIZE",
    "PATH",
    "POSITIVE_MEMORY_SIZE",
    "STRING",
    "ConfigOption",
    "OptionGroup",
    "OptionType",
    "apply_options",
    "duration_type",
    "enum_type",
    "float_type",
    "int_type",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class OptionType(Generic[T_co]):
    """A kind of value: its name in the docs, its parser and its writer."""

    name: str
    parser: Callable[[object, str | None], T_co]
    writer: Callable[[Any], str] = parsers.format_value

    def parse(self, raw: object, key: str | None = None) -> T_co:
        """The typed value of ``raw`` set under ``key`` (``ConfigurationError`` if invalid)."""
        return self.parser(raw, key)


DURATION = OptionType("Duration", parsers.parse_duration_ms, parsers.format_duration_ms)
MEMORY_SIZE = OptionType("MemorySize", parsers.parse_memory_size, parsers.format_memory_size)
BOOLEAN = OptionType("Boolean", parsers.parse_bool)
STRING = OptionType("String", parsers.parse_string)
PATH = OptionType("Path", parsers.parse_string)
"""A path or URI; ``Configuration`` refuses one whose filesystem scheme is unknown when set."""
LIST = OptionType("List", parsers.parse_list, parsers.format_list)
MAP = OptionType("Map", parsers.parse_map, parsers.format_map)


def int_type(minimum: int | None = None, maximum: int | None = None) -> OptionType[int]:
    """Integers, optionally bounded."""
    parse = functools.partial(parsers.parse_int, minimum=minimum, maximum=maximum)
    return OptionType("Integer", parse)


def _parse_positive_memory_size(raw: object, key: str | None) -> int:
    size = parsers.parse_memory_size(raw, key)
    if size <= 0:
        raise parsers.invalid_value(key, raw, "a memory size above 0, such as '8 mb'")
    return size


POSITIVE_MEMORY_SIZE = OptionType(
    "MemorySize", _parse_positive_memory_size, parsers.format_memory_size
)
"""Memory sizes above zero (a rate, a limit that 0 would make meaningless)."""


def float_type(
    minimum: float | None = None, maximum: float | None = None, *, above: float | None = None
) -> OptionType[float]:
    """Numbers, optionally bounded (``above``: an exclusive lower bound)."""
    parse = functools.partial(parsers.parse_float, minimum=minimum, maximum=maximum, above=above)
    return OptionType("Float", parse)


def duration_type(minimum: int, *, or_zero: bool = False) -> OptionType[int]:
    """Durations of at least ``minimum`` ms (and 0 when ``or_zero``: "off")."""
    parse = functools.partial(parsers.parse_bounded_duration_ms, minimum=minimum, or_zero=or_zero)
    return OptionType("Duration", parse, parsers.format_duration_ms)


def enum_type(*choices: str, aliases: Mapping[str, str] | None = None) -> OptionType[str]:
    """One of ``choices`` (returned in the spelling given here); ``aliases`` map to choices."""

    def parse(raw: object, key: str | None) -> str:
        return parsers.parse_enum(raw, choices, key, aliases)

    return OptionType(f"Enum ({', '.join(choices)})", parse)


@dataclass(frozen=True, slots=True)
class ConfigOption(Generic[T]):
    """A key, its deprecated keys (read when the key is not set), type, default, description."""

    key: str
    type: OptionType[T]
    default: T
    description: str
    deprecated_keys: tuple[str, ...] = ()

    @property
    def all_keys(self) -> tuple[str, ...]:
        """The current key followed by the deprecated ones, in lookup order."""
        return (self.key, *self.deprecated_keys)

    def find_key(self, config: Mapping[str, Any]) -> str | None:
        """The first of ``all_keys`` set in ``config`` (``None`` if none is)."""
        for candidate in self.all_keys:
            if config.get(candidate) is not None:
                return candidate
        return None

    def is_set(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` sets this option under any of its keys."""
        return self.find_key(config) is not None

    def read(self, config: Mapping[str, Any]) -> T:
        """The parsed value in ``config``, or the default when no key is set."""
        found = self.find_key(config)
        return self.default if found is None else self.parse(config[found], found)

    def parse(self, raw: object, key: str | None = None) -> T:
        """The typed value of ``raw`` (set under ``key``, this option's key by default)."""
        return self.type.parse(raw, key or self.key)

    def format(self, value: object) -> str:
        """The configuration string of a typed ``value`` ("10 min", "20 kb", "true")."""
        return self.type.writer(value)


class OptionGroup:
    """A set of options declared as class attributes: one section of the docs."""

    TITLE: ClassVar[str] = ""

    @classmethod
    def all_options(cls) -> tuple[ConfigOption[Any], ...]:
        """Every option declared in the group, in declaration order."""
        return tuple(v for v in vars(cls).values() if isinstance(v, ConfigOption))


def apply_options(
    config: Mapping[str, Any], setters: Iterable[tuple[ConfigOption[Any], Callable[[Any], object]]]
) -> None:
    """Call each setter, in order, with the value of its option where ``config`` sets it."""
    for option, setter in setters:
        if option.is_set(config):
            setter(option.read(config))
