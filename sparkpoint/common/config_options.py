"""``ConfigOptions``/``ConfigOption`` as ``pyflink.common`` spells them: a key, its value type
and default, built with ``ConfigOptions.key(k).int_type().default_value(1)``. sparkpoint's own
options live in ``sparkpoint.config``; these describe a user's keys."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

__all__ = ["ConfigOption", "ConfigOptions"]

T = TypeVar("T")


class ConfigOption(Generic[T]):
    """A configuration key with its value type and, optionally, a default."""

    def __init__(self, key: str, value_type: type, default: Any, has_default: bool) -> None:
        self._key = key
        self._type = value_type
        self._default = default
        self._has_default = has_default

    def key(self) -> str:
        """The key."""
        return self._key

    def default_value(self) -> Any:
        """The default (None when there is none)."""
        return self._default

    def has_default_value(self) -> bool:
        """Whether there is a default."""
        return self._has_default

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigOption) and (self._key, self._type, self._default) == (
            other._key,
            other._type,
            other._default,
        )

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Key: '{self._key}' , default: {self._default}"


class ConfigOptions:
    """Builds ``ConfigOption``s: ``ConfigOptions.key("k").string_type().default_value("v")``."""

    @staticmethod
    def key(key: str) -> ConfigOptions.OptionBuilder:
        """Start an option of ``key``."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"The key must be a non-empty string, got {key!r}")
        return ConfigOptions.OptionBuilder(key)

    class OptionBuilder:
        """Chooses the option's value type."""

        def __init__(self, key: str) -> None:
            self._key = key

        def _typed(self, value_type: type) -> ConfigOptions.TypedConfigOptionBuilder[Any]:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, value_type)

        def boolean_type(self) -> ConfigOptions.TypedConfigOptionBuilder[bool]:
            """A bool value."""
            return self._typed(bool)

        def int_type(self) -> ConfigOptions.TypedConfigOptionBuilder[int]:
            """An int value."""
            return self._typed(int)

        def long_type(self) -> ConfigOptions.TypedConfigOptionBuilder[int]:
            """A long (int) value."""
            return self._typed(int)

        def float_type(self) -> ConfigOptions.TypedConfigOptionBuilder[float]:
            """A float value."""
            return self._typed(float)

        def double_type(self) -> ConfigOptions.TypedConfigOptionBuilder[float]:
            """A double (float) value."""
            return self._typed(float)

        def string_type(self) -> ConfigOptions.TypedConfigOptionBuilder[str]:
            """A string value."""
            return self._typed(str)

    class TypedConfigOptionBuilder(Generic[T]):
        """Sets the option's default."""

        def __init__(self, key: str, value_type: type) -> None:
            self._key = key
            self._type = value_type

        def default_value(self, value: T) -> ConfigOption[T]:
            """The option with default ``value`` (of the option's type)."""
            if (isinstance(value, bool) and self._type is not bool) or not isinstance(
                value, self._type if self._type is not float else (int, float)
            ):
                raise TypeError(
                    f"default of {self._key!r} must be a {self._type.__name__}, got {value!r}"
                )
            return ConfigOption(self._key, self._type, value, True)

        def no_default_value(self) -> ConfigOption[T]:
            """The option without a default."""
            return ConfigOption(self._key, self._type, None, False)
