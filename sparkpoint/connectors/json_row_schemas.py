"""JSON rows for byte-oriented connectors (Kafka): PyFlink's ``JsonRowDeserializationSchema``
and ``JsonRowSerializationSchema`` (``pyflink.datastream.formats.json``), in Python.

A ``RowTypeInfo`` names the JSON object's fields and their types. Serialization writes the
fields in the type's order, compactly, numbers as Jackson writes them from Java
(``Double.toString``/``Float.toString``), non-finite floats as strings, ``bytes`` as base64,
dates and times in RFC 3339 as Flink's JSON row format. Deserialization reads a field that
is missing or null as None (``fail_on_missing_field``: a missing field is an error); a message
that cannot be read fails the job with an error naming it, or is skipped with
``ignore_parse_errors`` (Flink's schema returns null then and the Kafka source drops it).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
from collections.abc import Callable
from typing import Any

from sparkpoint.connectors.java_format import java_double_string, java_float_string
from sparkpoint.connectors.serialization_schemas import DeserializationSchema, SerializationSchema
from sparkpoint.errors import ConfigurationError
from sparkpoint.state.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TypeInformation,
)
from sparkpoint.types import Row

__all__ = ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"]

_INTEGERS = {"BYTE": 8, "SHORT": 16, "INT": 32, "LONG": 64}
_SHOWN = 200  # characters of a bad message an error shows


class JsonParseError(ValueError):
    """A JSON message does not match the row type (or is not JSON)."""


def _row_type(type_info: Any, what: str) -> RowTypeInfo:
    if type_info is None:
        raise TypeError("Typeinfo should be set.")
    if not isinstance(type_info, RowTypeInfo):
        raise ConfigurationError(f"{what} needs a RowTypeInfo (Types.ROW_NAMED), got {type_info!r}")
    return type_info


class JsonRowDeserializationSchema(DeserializationSchema):
    """JSON objects → ``Row``s of the given ``RowTypeInfo``; build one with ``builder()``."""

    def __init__(
        self, type_info: RowTypeInfo, fail_on_missing_field: bool, ignore_parse_errors: bool
    ) -> None:
        if fail_on_missing_field and ignore_parse_errors:
            raise ConfigurationError(
                "JSON format doesn't support failOnMissingField and ignoreParseErrors are both "
                "true."
            )
        self.type_info = type_info
        self.fail_on_missing_field = fail_on_missing_field
        self.ignore_parse_errors = ignore_parse_errors
        self._read = _reader(type_info, fail_on_missing_field)

    @staticmethod
    def builder() -> JsonRowDeserializationSchemaBuilder:
        """A builder (PyFlink's ``JsonRowDeserializationSchema.Builder``)."""
        return JsonRowDeserializationSchemaBuilder()

    def deserialize(self, message: bytes) -> Row | None:
        """The row of one JSON object (None: unreadable, with ``ignore_parse_errors``)."""
        try:
            # Decimal keeps a BIG_DEC's digits (Flink reads them as BigDecimal); doubles convert.
            return self._read(json.loads(message, parse_float=decimal.Decimal))  # type: ignore[no-any-return]
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            if self.ignore_parse_errors:
                return None
            shown = bytes(message[:_SHOWN]).decode("utf-8", "replace")
            raise JsonParseError(f"Failed to deserialize JSON '{shown}': {exc}") from exc


class JsonRowDeserializationSchemaBuilder:
    """Type info (required), ``fail_on_missing_field``, ``ignore_parse_errors``."""

    def __init__(self) -> None:
        self._type_info: Any = None
        self._fail_on_missing_field = False
        self._ignore_parse_errors = False

    def type_info(self, type_info: TypeInformation) -> JsonRowDeserializationSchemaBuilder:
        """The rows' type: its field names are the JSON properties read."""
        self._type_info = type_info
        return self

    def json_schema(self, json_schema: str) -> JsonRowDeserializationSchemaBuilder:
        """Not supported: Flink converts a JSON schema with a Java class; give
        ``type_info`` instead."""
        raise ConfigurationError(
            "json_schema() is not supported by sparkpoint: describe the rows with type_info("
            "Types.ROW_NAMED(...)) instead"
        )

    def fail_on_missing_field(self) -> JsonRowDeserializationSchemaBuilder:
        """A missing field fails the record (by default it reads as None)."""
        self._fail_on_missing_field = True
        return self

    def ignore_parse_errors(self) -> JsonRowDeserializationSchemaBuilder:
        """A message that cannot be read is skipped instead of failing the job."""
        self._ignore_parse_errors = True
        return self

    def build(self) -> JsonRowDeserializationSchema:
        """The schema."""
        row_type = _row_type(self._type_info, "JsonRowDeserializationSchema")
        return JsonRowDeserializationSchema(
            row_type, self._fail_on_missing_field, self._ignore_parse_errors
        )


class JsonRowSerializationSchema(SerializationSchema):
    """``Row``s of the given ``RowTypeInfo`` → JSON objects; build one with ``builder()``."""

    def __init__(self, type_info: RowTypeInfo) -> None:
        self.type_info = type_info
        self._write = _writer(type_info)

    @staticmethod
    def builder() -> JsonRowSerializationSchemaBuilder:
        """A builder (PyFlink's ``JsonRowSerializationSchema.Builder``)."""
        return JsonRowSerializationSchemaBuilder()

    def serialize(self, value: Any) -> bytes:
        """The UTF-8 JSON of one row (a ``Row`` or tuple of the type's arity)."""
        try:
            return self._write(value).encode("utf-8")
        except (ValueError, TypeError) as exc:
            raise JsonParseError(
                f"Could not serialize row '{value!r}'. Make sure that the schema matches the "
                f"input: {exc}"
            ) from exc


class JsonRowSerializationSchemaBuilder:
    """Type info (required)."""

    def __init__(self) -> None:
        self._type_info: Any = None

    def with_type_info(self, type_info: TypeInformation) -> JsonRowSerializationSchemaBuilder:
        """The rows' type: its field names become the JSON properties."""
        self._type_info = type_info
        return self

    def build(self) -> JsonRowSerializationSchema:
        """The schema."""
        return JsonRowSerializationSchema(_row_type(self._type_info, "JsonRowSerializationSchema"))


# -- reading --------------------------------------------------------------------------------
def _reader(t: Any, fail_on_missing: bool) -> Callable[[Any], Any]:
    if isinstance(t, RowTypeInfo):
        names = t.get_field_names()
        fields = [_nullable(_reader(ft, fail_on_missing)) for ft in t.get_field_types()]

        def row(node: Any) -> Row:
            if not isinstance(node, dict):
                raise JsonParseError(f"expected a JSON object, got {_kind(node)}")
            values = []
            for name, read in zip(names, fields):
                if name not in node and fail_on_missing:
                    raise JsonParseError(f"Could not find field with name '{name}'.")
                values.append(read(node.get(name)))
            return Row(**dict(zip(names, values)))

        return row
    if isinstance(t, (BasicArrayTypeInfo, PrimitiveArrayTypeInfo, ListTypeInfo)):
        if isinstance(t, PrimitiveArrayTypeInfo) and _basic(t.element) == "BYTE":
            return _read_bytes
        element = _nullable(_reader(t.element, fail_on_missing))
        return lambda node: [element(v) for v in _expect(node, list, "an array")]
    if isinstance(t, MapTypeInfo):
        key, value = _reader(t.key_type, fail_on_missing), _reader(t.value_type, fail_on_missing)
        items = _nullable(value)
        return lambda node: {key(k): items(v) for k, v in _expect(node, dict, "an object").items()}
    name = _basic(t)
    if name is None:
        raise ConfigurationError(f"The JSON row format cannot read fields of type {t!r}")
    return _BASIC_READERS[name]


def _nullable(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda node: None if node is None else read(node)


def _expect(node: Any, kind: type, what: str) -> Any:
    if not isinstance(node, kind):
        raise JsonParseError(f"expected {what}, got {_kind(node)}")
    return node


def _kind(node: Any) -> str:
    return f"{type(node).__name__} {json.dumps(node, default=str)[:_SHOWN]}"


def _read_bytes(node: Any) -> bytes:
    return base64.b64decode(_expect(node, str, "a base64 string"), validate=True)


def _read_string(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, (dict, list)):
        return json.dumps(node, separators=(",", ":"), ensure_ascii=False, default=_number)
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, (float, decimal.Decimal)):
        return java_double_string(float(node))
    return str(node)


def _number(node: Any) -> Any:
    """A Decimal read from JSON, written back in JSON as the number it was."""
    if isinstance(node, decimal.Decimal):
        return float(node)
    raise TypeError(f"not JSON: {node!r}")


def _read_boolean(node: Any) -> bool:
    if isinstance(node, bool):
        return node
    if isinstance(node, str) and node.strip().lower() in ("true", "false"):
        return node.strip().lower() == "true"
    raise JsonParseError(f"expected a boolean, got {_kind(node)}")


def _read_integer(bits: int) -> Callable[[Any], int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def read(node: Any) -> int:
        if isinstance(node, bool) or not isinstance(node, (int, float, decimal.Decimal, str)):
            raise JsonParseError(f"expected an integer, got {_kind(node)}")
        value = int(node) if not isinstance(node, str) else int(node.strip())
        if not lo <= value <= hi:
            raise JsonParseError(f"{value} does not fit in {bits} bits")
        return value

    return read


def _read_float(node: Any) -> float:
    if isinstance(node, bool) or not isinstance(node, (int, float, decimal.Decimal, str)):
        raise JsonParseError(f"expected a number, got {_kind(node)}")
    return float(node)


def _read_big_int(node: Any) -> int:
    if isinstance(node, bool) or not isinstance(node, (int, str)):
        raise JsonParseError(f"expected an integer, got {_kind(node)}")
    return int(node)


def _read_decimal(node: Any) -> decimal.Decimal:
    if isinstance(node, bool) or not isinstance(node, (int, float, decimal.Decimal, str)):
        raise JsonParseError(f"expected a number, got {_kind(node)}")
    try:
        return decimal.Decimal(str(node))
    except decimal.InvalidOperation as exc:
        raise JsonParseError(f"expected a decimal, got {_kind(node)}") from exc


def _read_date(node: Any) -> datetime.date:
    return datetime.date.fromisoformat(_expect(node, str, "a date string"))


def _read_time(node: Any) -> datetime.time:
    text = _expect(node, str, "a time string")
    return datetime.time.fromisoformat(text[:-1] if text.endswith("Z") else text)


def _read_timestamp(node: Any) -> datetime.datetime:
    text = _expect(node, str, "a timestamp string")
    return datetime.datetime.fromisoformat(text[:-1] if text.endswith("Z") else text)


_BASIC_READERS: dict[str, Callable[[Any], Any]] = {
    "STRING": _read_string,
    "CHAR": _read_string,
    "BOOLEAN": _read_boolean,
    **{name: _read_integer(bits) for name, bits in _INTEGERS.items()},
    "FLOAT": _read_float,
    "DOUBLE": _read_float,
    "BIG_INT": _read_big_int,
    "BIG_DEC": _read_decimal,
    "SQL_DATE": _read_date,
    "SQL_TIME": _read_time,
    "SQL_TIMESTAMP": _read_timestamp,
}


# -- writing --------------------------------------------------------------------------------
def _writer(t: Any) -> Callable[[Any], str]:
    if isinstance(t, RowTypeInfo):
        keys = [json.dumps(n, ensure_ascii=False) + ":" for n in t.get_field_names()]
        fields = [_nullable_text(_writer(ft)) for ft in t.get_field_types()]

        def row(value: Any) -> str:
            if len(value) != len(fields):
                raise JsonParseError(f"the row has {len(value)} fields, the type {len(fields)}")
            return "{" + ",".join(k + w(v) for k, w, v in zip(keys, fields, value)) + "}"

        return row
    if isinstance(t, (BasicArrayTypeInfo, PrimitiveArrayTypeInfo, ListTypeInfo)):
        if isinstance(t, PrimitiveArrayTypeInfo) and _basic(t.element) == "BYTE":
            return lambda value: json.dumps(base64.b64encode(bytes(value)).decode("ascii"))
        element = _nullable_text(_writer(t.element))
        return lambda value: "[" + ",".join(element(v) for v in value) + "]"
    if isinstance(t, MapTypeInfo):
        items = _nullable_text(_writer(t.value_type))
        return lambda value: (
            "{"
            + ",".join(
                json.dumps(_read_string(k), ensure_ascii=False) + ":" + items(v)
                for k, v in value.items()
            )
            + "}"
        )
    name = _basic(t)
    if name is None:
        raise ConfigurationError(f"The JSON row format cannot write fields of type {t!r}")
    return _BASIC_WRITERS[name]


def _nullable_text(write: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda value: "null" if value is None else write(value)


def _basic(t: Any) -> str | None:
    return t.type_name if isinstance(t, BasicTypeInfo) else None


def _write_number(text: Callable[[float], str]) -> Callable[[Any], str]:
    def write(value: Any) -> str:
        shown = text(float(value))
        # Jackson quotes NaN and the infinities (QUOTE_NON_NUMERIC_NUMBERS).
        return shown if math.isfinite(float(value)) else json.dumps(shown)

    return write


def _write_integer(value: Any) -> str:
    if isinstance(value, bool):
        raise JsonParseError(f"expected an integer, got {value!r}")
    return str(int(value))


def _write_time(value: datetime.time) -> str:
    return json.dumps(value.isoformat() + "Z")


def _write_timestamp(value: datetime.datetime) -> str:
    return json.dumps(value.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z")


_BASIC_WRITERS: dict[str, Callable[[Any], str]] = {
    "STRING": lambda v: json.dumps(str(v), ensure_ascii=False),
    "CHAR": lambda v: json.dumps(str(v), ensure_ascii=False),
    "BOOLEAN": lambda v: "true" if v else "false",
    **{name: _write_integer for name in _INTEGERS},
    "BIG_INT": _write_integer,
    "FLOAT": _write_number(java_float_string),
    "DOUBLE": _write_number(java_double_string),
    "BIG_DEC": lambda v: str(decimal.Decimal(v)),
    "SQL_DATE": lambda v: json.dumps(v.isoformat()),
    "SQL_TIME": _write_time,
    "SQL_TIMESTAMP": _write_timestamp,
}


# PyFlink's nested names: ``JsonRowDeserializationSchema.Builder`` and
# ``JsonRowSerializationSchema.Builder`` are the builders ``builder()`` returns.
JsonRowDeserializationSchema.Builder = JsonRowDeserializationSchemaBuilder  # type: ignore[attr-defined]
JsonRowSerializationSchema.Builder = JsonRowSerializationSchemaBuilder  # type: ignore[attr-defined]
