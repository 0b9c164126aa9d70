"""CSV rows for byte-oriented connectors (Kafka): PyFlink's ``CsvRowSerializationSchema`` and
``CsvRowDeserializationSchema`` (``pyflink.datastream.formats.csv``), one row per message.

Reading uses Python's ``csv`` module with the schema's delimiter, quote and escape
characters. Writing follows the Jackson CSV generator Flink uses byte for byte, which the
``csv`` module cannot: a string is quoted when it is longer than 24 UTF-16 units or holds a
character below the "safe" one (one above the highest of the field delimiter, quote
character and line delimiter), the quote character or the escape character (``\\`` when
none); inside quotes the quote character is doubled and the escape character escaped.
Numbers, booleans and nulls (the null literal, empty by default) are written bare; arrays
and nested rows are their elements joined by the array element delimiter (``;``), then
quoted as one string. Fields are converted as Flink's legacy CSV schema does (numbers
trimmed and parsed as Java parses them; ``Boolean.valueOf``; dates, times and timestamps as
``java.sql``'s ``valueOf``/``toString``). ``ignore_parse_errors``: a field that cannot be
converted reads as None, a message that cannot be split reads as None (skipped).
"""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import re
from collections.abc import Callable
from typing import Any

from sparkpoint.connectors.java_format import java_double_string, java_float_string
from sparkpoint.connectors.serialization_schemas import DeserializationSchema, SerializationSchema
from sparkpoint.errors import ConfigurationError
from sparkpoint.state.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TypeInformation,
)
from sparkpoint.types import Row

__all__ = ["CsvRowDeserializationSchema", "CsvRowSerializationSchema"]

_MAX_QUOTE_CHECK = 24  # Jackson quotes longer strings without looking at them
_SHOWN = 200


class CsvParseError(ValueError):
    """A CSV message does not match the row type, or a row cannot be written."""


def _row_type(type_info: Any) -> RowTypeInfo:
    if type_info is None:
        raise TypeError("Type information must not be None")
    if not isinstance(type_info, RowTypeInfo):
        raise ConfigurationError(f"The CSV row format needs a RowTypeInfo, got {type_info!r}")
    _check_types(type_info, "row")
    return type_info


def _check_types(t: Any, where: str, nested: bool = False) -> None:
    if isinstance(t, RowTypeInfo):
        if nested:
            for name, ft in zip(t.get_field_names(), t.get_field_types()):
                if not isinstance(ft, BasicTypeInfo) or ft.type_name not in _PARSERS:
                    raise ConfigurationError(
                        f"Unsupported type information {ft!r} for field '{name}' of the "
                        f"nested row {where}: a nested row holds basic types only"
                    )
            return
        for name, ft in zip(t.get_field_names(), t.get_field_types()):
            _check_types(ft, name, nested=True)
        return
    if isinstance(t, PrimitiveArrayTypeInfo) and _basic(t.element) == "BYTE":
        return
    if isinstance(t, (BasicArrayTypeInfo, ListTypeInfo, PrimitiveArrayTypeInfo)):
        if not isinstance(t.element, BasicTypeInfo) or t.element.type_name not in _PARSERS:
            raise ConfigurationError(
                f"Unsupported type information {t!r} for field '{where}': array elements "
                "must be basic types"
            )
        return
    if not isinstance(t, BasicTypeInfo) or t.type_name not in _PARSERS:
        raise ConfigurationError(f"Unsupported type information '{t!r}' for field '{where}'.")


def _basic(t: Any) -> str | None:
    return t.type_name if isinstance(t, BasicTypeInfo) else None


def _one_char(value: str, what: str) -> str:
    if not isinstance(value, str) or len(value) != 1:
        raise ConfigurationError(f"{what} must be a single character, got {value!r}")
    return value


# -- writing --------------------------------------------------------------------------------
class _Quoting:
    """Jackson's loose quoting check and quoted writing for one set of options."""

    def __init__(self, delimiter: str, quote: str | None, escape: str | None, line: str) -> None:
        self.quote, self.escape = quote, escape
        highest = max([ord(delimiter), ord(quote) if quote else -1, *map(ord, line)])
        self.min_safe = highest + 1
        specials = {escape} if escape else {quote or "\\", "\\"}
        self.specials = specials - {None}

    def text(self, value: str) -> str:
        quote = self.quote
        if quote is None or not self._needs_quotes(value):
            return value
        body = value.replace(quote, quote + quote)
        if self.escape is not None and self.escape != quote:
            body = "".join(
                quote + c if c == quote else (self.escape + c if c == self.escape else c)
                for c in value
            )
        return quote + body + quote

    def _needs_quotes(self, value: str) -> bool:
        if len(value) > _MAX_QUOTE_CHECK and _utf16_len(value) > _MAX_QUOTE_CHECK:
            return True
        min_safe, specials = self.min_safe, self.specials
        return any(ord(c) < min_safe or c in specials for c in value)


def _utf16_len(value: str) -> int:
    return len(value) + sum(1 for c in value if ord(c) > 0xFFFF)


def _element_text(t: Any, value: Any) -> str:
    """An array element or nested field as Jackson writes it inside the joined value."""
    name = _basic(t)
    if name == "DOUBLE":
        return java_double_string(float(value))
    if name == "FLOAT":
        return java_float_string(float(value))
    if name == "BOOLEAN":
        return "true" if value else "false"
    if name in ("BYTE", "SHORT", "INT", "LONG", "BIG_INT"):
        if isinstance(value, bool):
            raise CsvParseError(f"expected an integer, got {value!r}")
        return str(int(value))
    if name == "BIG_DEC":
        return str(decimal.Decimal(value))
    if name == "SQL_DATE":
        return value.isoformat()  # type: ignore[no-any-return]
    if name == "SQL_TIME":
        return value.strftime("%H:%M:%S")  # type: ignore[no-any-return]
    if name == "SQL_TIMESTAMP":
        return _timestamp_text(value)
    if isinstance(t, PrimitiveArrayTypeInfo):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


def _timestamp_text(value: datetime.datetime) -> str:
    """``java.sql.Timestamp.toString``: nanoseconds with trailing zeros cut, at least one."""
    fraction = f"{value.microsecond:06d}".rstrip("0") or "0"
    return value.strftime("%Y-%m-%d %H:%M:%S.") + fraction


_BARE = {"BYTE", "SHORT", "INT", "LONG", "BIG_INT", "BIG_DEC", "FLOAT", "DOUBLE", "BOOLEAN"}


class CsvRowSerializationSchema(SerializationSchema):
    """``Row``s of a ``RowTypeInfo`` → one CSV line each; build one with ``Builder``."""

    def __init__(
        self,
        type_info: RowTypeInfo,
        field_delimiter: str = ",",
        line_delimiter: str = "\n",
        array_element_delimiter: str = ";",
        quote_character: str | None = '"',
        escape_character: str | None = None,
        null_literal: str = "",
    ) -> None:
        self.type_info = _row_type(type_info)
        self.field_delimiter = field_delimiter
        self.line_delimiter = line_delimiter
        self.array_element_delimiter = array_element_delimiter
        self.null_literal = null_literal
        self._quoting = _Quoting(field_delimiter, quote_character, escape_character, line_delimiter)
        self._fields = [self._writer(ft) for ft in type_info.get_field_types()]

    def _writer(self, t: Any) -> Callable[[Any], str]:
        name, null, quoting = _basic(t), self.null_literal, self._quoting
        if name in _BARE:
            return lambda v: null if v is None else _element_text(t, v)
        if isinstance(t, PrimitiveArrayTypeInfo) and _basic(t.element) == "BYTE":
            return lambda v: null if v is None else quoting.text(_element_text(t, v))
        if isinstance(t, (BasicArrayTypeInfo, ListTypeInfo, PrimitiveArrayTypeInfo, RowTypeInfo)):
            types = t.get_field_types() if isinstance(t, RowTypeInfo) else None
            element = None if isinstance(t, RowTypeInfo) else t.element
            sep = self.array_element_delimiter

            def joined(v: Any) -> str:
                if v is None:
                    return null
                parts = [
                    null if x is None else _element_text(types[i] if types else element, x)
                    for i, x in enumerate(v)
                ]
                return quoting.text(sep.join(parts))

            return joined
        return lambda v: null if v is None else quoting.text(_element_text(t, v))

    def serialize(self, value: Any) -> bytes:
        """One CSV line (with the line delimiter) of a ``Row`` or tuple of the type's arity."""
        if len(value) != len(self._fields):
            raise CsvParseError(
                f"Could not serialize row '{value!r}': {len(value)} fields, the type has "
                f"{len(self._fields)}"
            )
        try:
            text = self.field_delimiter.join(w(v) for w, v in zip(self._fields, value))
        except (TypeError, ValueError, AttributeError) as exc:
            raise CsvParseError(f"Could not serialize row '{value!r}': {exc}") from exc
        return (text + self.line_delimiter).encode("utf-8")

    class Builder:
        """PyFlink's ``CsvRowSerializationSchema.Builder(type_info)``."""

        def __init__(self, type_info: TypeInformation) -> None:
            self._type_info = _row_type(type_info)
            self._options: dict[str, Any] = {}

        def set_field_delimiter(self, c: str) -> CsvRowSerializationSchema.Builder:
            """The character between fields (``,``)."""
            self._options["field_delimiter"] = _one_char(c, "field delimiter")
            return self

        def set_line_delimiter(self, delimiter: str) -> CsvRowSerializationSchema.Builder:
            """What ends a row: ``\\n`` (default), ``\\r``, ``\\r\\n`` or nothing."""
            if delimiter not in ("\n", "\r", "\r\n", ""):
                raise ConfigurationError(
                    f"Unsupported new line delimiter {delimiter!r}. Only \\n, \\r, \\r\\n, or "
                    "empty string are supported."
                )
            self._options["line_delimiter"] = delimiter
            return self

        def set_array_element_delimiter(self, delimiter: str) -> CsvRowSerializationSchema.Builder:
            """The text between array elements and nested row fields (``;``)."""
            self._options["array_element_delimiter"] = delimiter
            return self

        def disable_quote_character(self) -> CsvRowSerializationSchema.Builder:
            """Never quote (a value holding a delimiter then cannot be read back)."""
            self._options["quote_character"] = None
            return self

        def set_quote_character(self, c: str) -> CsvRowSerializationSchema.Builder:
            """The quote character (``"``)."""
            self._options["quote_character"] = _one_char(c, "quote character")
            return self

        def set_escape_character(self, c: str) -> CsvRowSerializationSchema.Builder:
            """The escape character inside quoted values (none by default)."""
            self._options["escape_character"] = _one_char(c, "escape character")
            return self

        def set_null_literal(self, s: str) -> CsvRowSerializationSchema.Builder:
            """The text of a null field (empty by default)."""
            self._options["null_literal"] = s
            return self

        def build(self) -> CsvRowSerializationSchema:
            """The schema."""
            return CsvRowSerializationSchema(self._type_info, **self._options)


# -- reading --------------------------------------------------------------------------------
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_DATE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})")
_TIME = re.compile(r"([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})")
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2}) ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(\.[0-9]{1,9})?"
)
_BITS = {"BYTE": 8, "SHORT": 16, "INT": 32, "LONG": 64}


def _java_trim(text: str) -> str:
    """Java's ``String.trim``: every character up to U+0020 off both ends."""
    return text.strip("".join(map(chr, range(0x21))))


def _match(pattern: re.Pattern[str], text: str, what: str) -> re.Match[str]:
    m = pattern.fullmatch(text)
    if m is None:
        raise CsvParseError(f'For input string: "{text}" ({what})')
    return m


def _parse_integer(bits: int) -> Callable[[str], int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def parse(text: str) -> int:
        value = int(_match(_INT, _java_trim(text), "an integer").group(0))
        if not lo <= value <= hi:
            raise CsvParseError(f'For input string: "{text}" (out of range)')
        return value

    return parse


def _parse_float(text: str) -> float:
    body = _match(_FLOAT, _java_trim(text), "a number").group(0).rstrip("fFdD")
    return float(body.replace("Infinity", "inf"))


def _parse_date(text: str) -> datetime.date:
    y, m, d = _match(_DATE, _java_trim(text), "a date yyyy-mm-dd").groups()
    return datetime.date(int(y), int(m), int(d))


def _parse_time(text: str) -> datetime.time:
    h, m, s = _match(_TIME, _java_trim(text), "a time hh:mm:ss").groups()
    return datetime.time(int(h), int(m), int(s))


def _parse_timestamp(text: str) -> datetime.datetime:
    g = _match(_TIMESTAMP, _java_trim(text), "a timestamp yyyy-mm-dd hh:mm:ss[.f]").groups()
    micros = int((g[6] or ".0")[1:].ljust(9, "0")[:6])
    y, mo, d, h, mi, s = map(int, g[:6])
    return datetime.datetime(y, mo, d, h, mi, s, micros)


_PARSERS: dict[str, Callable[[str], Any]] = {
    "STRING": lambda text: text,
    "CHAR": lambda text: text,
    "BOOLEAN": lambda text: _java_trim(text).lower() == "true",
    **{name: _parse_integer(bits) for name, bits in _BITS.items()},
    "BIG_INT": lambda text: int(_match(_INT, _java_trim(text), "an integer").group(0)),
    "FLOAT": _parse_float,
    "DOUBLE": _parse_float,
    "BIG_DEC": lambda text: decimal.Decimal(_match(_DECIMAL, _java_trim(text), "a decimal")[0]),
    "SQL_DATE": _parse_date,
    "SQL_TIME": _parse_time,
    "SQL_TIMESTAMP": _parse_timestamp,
}


class CsvRowDeserializationSchema(DeserializationSchema):
    """One CSV line per message → a ``Row`` of a ``RowTypeInfo``; build one with ``Builder``."""

    def __init__(
        self,
        type_info: RowTypeInfo,
        field_delimiter: str = ",",
        allow_comments: bool = False,
        array_element_delimiter: str = ";",
        quote_character: str | None = '"',
        escape_character: str | None = None,
        null_literal: str | None = None,
        ignore_parse_errors: bool = False,
    ) -> None:
        self.type_info = _row_type(type_info)
        self.allow_comments = allow_comments
        self.array_element_delimiter = array_element_delimiter
        self.null_literal = null_literal
        self.ignore_parse_errors = ignore_parse_errors
        self._dialect: dict[str, Any] = {
            "delimiter": field_delimiter,
            "quotechar": quote_character,
            "quoting": csv.QUOTE_MINIMAL if quote_character else csv.QUOTE_NONE,
            "escapechar": escape_character,
            "doublequote": True,
            "strict": True,
        }
        self._names = type_info.get_field_names()
        self._fields = [self._reader(ft) for ft in type_info.get_field_types()]

    def _reader(self, t: Any) -> Callable[[str], Any]:
        null = self.null_literal
        if isinstance(t, PrimitiveArrayTypeInfo) and _basic(t.element) == "BYTE":
            return self._nullable(lambda text: base64.b64decode(text, validate=True))
        if isinstance(t, (BasicArrayTypeInfo, ListTypeInfo, PrimitiveArrayTypeInfo, RowTypeInfo)):
            sep = self.array_element_delimiter
            if isinstance(t, RowTypeInfo):
                names = t.get_field_names()
                parsers = [_PARSERS[_basic(ft) or ""] for ft in t.get_field_types()]

                def row(text: str) -> Row:
                    parts = text.split(sep) if text else []
                    if len(parts) != len(parsers):
                        raise CsvParseError(
                            f"Row length mismatch. {len(parsers)} fields expected but was "
                            f"{len(parts)}."
                        )
                    values = [None if p == null else f(p) for f, p in zip(parsers, parts)]
                    return Row(**dict(zip(names, values)))

                return self._nullable(row, whole_null=False)
            element = _PARSERS[_basic(t.element) or ""]
            return self._nullable(
                lambda text: (
                    [None if p == null else element(p) for p in text.split(sep)] if text else []
                ),
                whole_null=False,
            )
        return self._nullable(_PARSERS[_basic(t) or ""])

    def _nullable(
        self, parse: Callable[[str], Any], whole_null: bool = True
    ) -> Callable[[str], Any]:
        """``parse`` with the null literal and ``ignore_parse_errors`` applied; an array's or
        nested row's column is split first (Jackson's array column), its elements compared
        with the null literal."""
        null = self.null_literal if whole_null else None
        ignore = self.ignore_parse_errors

        def read(text: str) -> Any:
            if text == null:
                return None
            try:
                return parse(text)
            except (ValueError, TypeError, decimal.InvalidOperation, IndexError):
                if ignore:
                    return None
                raise

        return read

    def _split(self, message: bytes) -> list[str]:
        text = bytes(message).decode("utf-8")
        if self.allow_comments:
            text = text.lstrip(" \t")
            if text.startswith("#"):
                text = ""
        if not text.strip("\r\n"):
            raise CsvParseError("No content to map due to end-of-input")
        reader = csv.reader(io.StringIO(text, newline=""), **self._dialect)
        fields = next(reader)
        if len(fields) > len(self._fields):
            raise CsvParseError(
                f"Too many entries: expected at most {len(self._fields)}, got {len(fields)}"
            )
        return fields

    def deserialize(self, message: bytes) -> Row | None:
        """The row of one CSV line (None: unreadable, with ``ignore_parse_errors``)."""
        try:
            fields = self._split(message)
            if len(fields) != len(self._fields) and not self.ignore_parse_errors:
                raise CsvParseError(
                    f"Row length mismatch. {len(self._fields)} fields expected but was "
                    f"{len(fields)}."
                )
            values = [read(text) for read, text in zip(self._fields, fields)]
        except (ValueError, TypeError, csv.Error, decimal.InvalidOperation) as exc:
            if self.ignore_parse_errors:
                return None
            shown = bytes(message[:_SHOWN]).decode("utf-8", "replace")
            raise CsvParseError(f"Failed to deserialize CSV row '{shown}': {exc}") from exc
        values += [None] * (len(self._fields) - len(values))
        return Row(**dict(zip(self._names, values)))

    class Builder:
        """PyFlink's ``CsvRowDeserializationSchema.Builder(type_info)``."""

        def __init__(self, type_info: TypeInformation) -> None:
            self._type_info = _row_type(type_info)
            self._options: dict[str, Any] = {}

        def set_field_delimiter(self, delimiter: str) -> CsvRowDeserializationSchema.Builder:
            """The character between fields (``,``)."""
            self._options["field_delimiter"] = _one_char(delimiter, "field delimiter")
            return self

        def set_allow_comments(self, allow_comments: bool) -> CsvRowDeserializationSchema.Builder:
            """A message whose line starts with ``#`` is a comment (an empty message)."""
            self._options["allow_comments"] = bool(allow_comments)
            return self

        def set_array_element_delimiter(
            self, delimiter: str
        ) -> CsvRowDeserializationSchema.Builder:
            """The text between array elements and nested row fields (``;``)."""
            self._options["array_element_delimiter"] = delimiter
            return self

        def set_quote_character(self, c: str) -> CsvRowDeserializationSchema.Builder:
            """The quote character (``"``)."""
            self._options["quote_character"] = _one_char(c, "quote character")
            return self

        def set_escape_character(self, c: str) -> CsvRowDeserializationSchema.Builder:
            """The escape character (none by default)."""
            self._options["escape_character"] = _one_char(c, "escape character")
            return self

        def set_null_literal(self, null_literal: str) -> CsvRowDeserializationSchema.Builder:
            """A field with exactly this text reads as None (none by default)."""
            self._options["null_literal"] = null_literal
            return self

        def set_ignore_parse_errors(
            self, ignore_parse_errors: bool
        ) -> CsvRowDeserializationSchema.Builder:
            """A field that cannot be converted reads as None, a message that cannot be split
            is skipped, instead of failing the job."""
            self._options["ignore_parse_errors"] = bool(ignore_parse_errors)
            return self

        def build(self) -> CsvRowDeserializationSchema:
            """The schema."""
            return CsvRowDeserializationSchema(self._type_info, **self._options)
