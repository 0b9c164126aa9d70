"""``Configuration``: string key/value settings as ``pyflink.common.Configuration`` spells them.

Values are stored as strings (as Flink serialises them); typed getters parse on read with
``sparkpoint.config``'s parsers. A value set under a key of the option table is checked
when it is set (``ConfigurationError`` naming the key, the value and what is allowed). A
``Configuration`` is a read-only ``Mapping[str, str]``, so it can be passed anywhere a plain
dict of Flink keys is accepted.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from sparkpoint.checkpoint.storage_policies import check_scheme
from sparkpoint.config import (
    PATH,
    STRING,
    ConfigOption,
    find_option,
    format_value,
    parse_bool,
    parse_duration_ms,
    parse_float,
    parse_int,
    parse_memory_size,
)

__all__ = ["Configuration", "get_with_deprecated"]

_T = TypeVar("_T")


def _to_string(key: str, value: object) -> str:
    """Flink's string form of ``value``, checked against the option ``key`` names (if any)."""
    option = find_option(key)
    if option is None or value is None:
        return format_value(value)
    typed = option.parse(value, key)
    if option.type is PATH and isinstance(typed, str):
        check_scheme(typed, key)
    return value if isinstance(value, str) else option.format(typed)


def _checked(key: str, value: object, parse: Callable[[object, str], object]) -> object:
    """``value`` as given when an option of the table reads ``key`` (its own parser checks
    it), else parsed by the typed setter's ``parse``."""
    return value if find_option(key) is not None else parse(value, key)


class Configuration(Mapping[str, str]):
    """A mutable set of configuration keys and string values (``pyflink.common.Configuration``)."""

    def __init__(self, other: Configuration | Mapping[str, object] | None = None) -> None:
        self._data: dict[str, str] = {}
        if other is not None:
            for key, value in other.items():
                self._data[key] = _to_string(key, value)

    # ---- Mapping --------------------------------------------------------------------

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # ---- PyFlink API ----------------------------------------------------------------

    @classmethod
    def from_dict(cls, map: Mapping[str, str]) -> Configuration:
        """A configuration of the keys and values of ``map``."""
        return cls(map)

    @staticmethod
    def parse_list_value(value: str) -> list[str]:
        """A list value's items: a flow list ``[a, b]`` or ``a;b`` (Flink's two forms)."""
        if not value:
            return []
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            inner = text[1:-1].strip()
            return [p.strip().strip("'\"") for p in inner.split(",")] if inner else []
        return value.split(";")

    def get_bytearray(self, key: str, default_value: bytearray) -> bytearray:
        """The bytes set under ``key`` (stored base64, as Flink's string form of bytes)."""
        text = self._data.get(key)
        if text is None:
            return default_value
        return bytearray(base64.b64decode(text, validate=True))

    def set_bytearray(self, key: str, value: bytearray) -> Configuration:
        """Set ``key`` to bytes."""
        self._data[key] = base64.b64encode(bytes(value)).decode("ascii")
        return self

    def get_string(self, key: str, default_value: str | None = None) -> str | None:
        """The value of ``key``, or ``default_value`` when unset."""
        return self._data.get(key, default_value)

    def set_string(self, key: str, value: str) -> Configuration:
        """Set ``key`` to ``value``."""
        self._data[key] = _to_string(key, value)
        return self

    def get_integer(self, key: str, default_value: int) -> int:
        """The value of ``key`` as an int, or ``default_value`` when unset."""
        raw = self._data.get(key)
        return default_value if raw is None else parse_int(raw, key)

    def set_integer(self, key: str, value: int) -> Configuration:
        """Set ``key`` to the integer ``value``."""
        self._data[key] = _to_string(key, _checked(key, value, parse_int))
        return self

    def get_boolean(self, key: str, default_value: bool) -> bool:
        """The value of ``key`` as a bool ("true"/"false"), or ``default_value`` when unset."""
        raw = self._data.get(key)
        return default_value if raw is None else parse_bool(raw, key)

    def set_boolean(self, key: str, value: bool) -> Configuration:
        """Set ``key`` to the boolean ``value``."""
        self._data[key] = _to_string(key, _checked(key, value, parse_bool))
        return self

    def get_float(self, key: str, default_value: float) -> float:
        """The value of ``key`` as a float, or ``default_value`` when unset."""
        raw = self._data.get(key)
        return default_value if raw is None else parse_float(raw, key)

    def set_float(self, key: str, value: float) -> Configuration:
        """Set ``key`` to the float ``value``."""
        self._data[key] = _to_string(key, _checked(key, value, parse_float))
        return self

    def get_duration_millis(self, key: str, default_value: int) -> int:
        """The value of ``key`` as milliseconds of a Flink duration ("10 min", "500 ms")."""
        raw = self._data.get(key)
        return default_value if raw is None else parse_duration_ms(raw, key)

    def get_memory_size(self, key: str, default_value: int) -> int:
        """The value of ``key`` as bytes of a Flink memory size ("20 kb", "1 mb")."""
        raw = self._data.get(key)
        return default_value if raw is None else parse_memory_size(raw, key)

    def key_set(self) -> set[str]:
        """All keys that are set."""
        return set(self._data)

    def contains_key(self, key: str) -> bool:
        """Whether ``key`` is set."""
        return key in self._data

    def add_all(self, other: Mapping[str, object], prefix: str | None = None) -> Configuration:
        """Copy every entry of ``other`` into this one (keys prefixed with ``prefix``)."""
        for key, value in other.items():
            full_key = f"{prefix}{key}" if prefix else key
            self._data[full_key] = _to_string(full_key, value)
        return self

    def add_all_to_dict(self, target_dict: dict[str, str]) -> None:
        """Copy every entry into ``target_dict``."""
        target_dict.update(self._data)

    def remove_config(self, key: str) -> bool:
        """Unset ``key``; whether it was set."""
        return self._data.pop(key, None) is not None

    def to_dict(self) -> dict[str, str]:
        """A plain dict copy of all entries."""
        return dict(self._data)

    def get_with_deprecated(
        self, key: str, *deprecated_keys: str, default: _T | None = None
    ) -> str | _T | None:
        """The value of ``key``, else of the first deprecated key that is set, else default."""
        return get_with_deprecated(self._data, key, *deprecated_keys, default=default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Configuration):
            return self._data == other._data
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._data.items())))

    def __deepcopy__(self, memo: dict[int, object]) -> Configuration:
        return Configuration(self)

    def __repr__(self) -> str:
        return f"Configuration({self._data!r})"

    def __str__(self) -> str:
        return str(self._data)


def get_with_deprecated(
    config: Mapping[str, object],
    key: str,
    *deprecated_keys: str,
    default: _T | None = None,
) -> str | _T | None:
    """The string value of ``key`` in ``config``, else of the first deprecated key set."""
    option: ConfigOption[str | _T | None] = ConfigOption(key, STRING, default, "", deprecated_keys)
    return option.read(config)
