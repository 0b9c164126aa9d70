"""Java's ``toString`` of typed values, as PyFlink's Java sinks print them.

``Double.toString``/``Float.toString`` as Java 17 writes them (its digits,
``java_floating_decimal``: not always the shortest, 2.5e10 as a float is ``2.49999995E10``;
plain between 10^-3 and 10^7, else ``d.dddE±n``), Java's spelling of
booleans, nulls, tuples, rows, lists, ``java.sql`` dates and times, and ``HashMap.toString``
in the map's iteration order (by the keys' Java ``hashCode``).
"""

from __future__ import annotations

import datetime
import math
import struct
from collections.abc import Callable
from typing import Any

from sparkpoint.connectors.java_floating_decimal import java17_digits
from sparkpoint.state.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
)
from sparkpoint.types import Row

__all__ = [
    "hash_map_order",
    "java_double_string",
    "java_float_string",
    "java_hash_code",
    "java_string",
]


def java_double_string(x: float) -> str:
    """``Double.toString(x)`` on Java 17: ``1.23456789E7``, ``1.0E-5``, ``0.001``, ``4.9E-324``."""
    special = _special(x)
    if special is not None:
        return special
    sign = "-" if x < 0 else ""
    return sign + _layout(*java17_digits(abs(x), False))


def java_float_string(x: float) -> str:
    """``Float.toString((float) x)`` on Java 17: ``x`` is rounded to a 32-bit float first."""
    x = _to_float32(x)
    special = _special(x)
    if special is not None:
        return special
    sign = "-" if x < 0 else ""
    return sign + _layout(*java17_digits(abs(x), True))


def _to_float32(x: float) -> float:
    try:
        return struct.unpack(">f", struct.pack(">f", x))[0]  # type: ignore[no-any-return]
    except OverflowError:  # beyond the float range: Java's (float) cast gives an infinity
        return math.copysign(math.inf, x)


def _special(x: float) -> str | None:
    if x != x:
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    return None


def _layout(digits: str, exp10: int) -> str:
    """Java's layout of ``0.digits * 10**exp10``: plain in [10^-3, 10^7), else ``d.dE±n``."""
    if -3 < exp10 <= 7:
        if exp10 <= 0:
            return "0." + "0" * (-exp10) + digits
        whole = digits[:exp10].ljust(exp10, "0")
        return whole + "." + (digits[exp10:] or "0")
    return digits[0] + "." + (digits[1:] or "0") + "E" + str(exp10 - 1)


# --- hashCode and HashMap order ---------------------------------------------------------


def _int32(h: int) -> int:
    return h & 0xFFFFFFFF


def _string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _long_hash(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return _int32(v ^ (v >> 32))


def _double_hash(v: float) -> int:
    if v != v:
        return _long_hash(0x7FF8000000000000)
    return _long_hash(struct.unpack(">q", struct.pack(">d", v))[0])


def _float_hash(v: float) -> int:
    v = _to_float32(v)
    if v != v:
        return 0x7FC00000
    return _int32(struct.unpack(">i", struct.pack(">f", v))[0])


def _big_integer_hash(v: int) -> int:
    mag = abs(v)
    words = []
    while mag:
        words.append(mag & 0xFFFFFFFF)
        mag >>= 32
    h = 0
    for w in reversed(words):
        h = (31 * h + w) & 0xFFFFFFFF
    return _int32(-h if v < 0 else h)


def _value_hash(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, bool):
        return 1231 if v else 1237
    if isinstance(v, int):
        return _int32(v) if -(2**31) <= v < 2**31 else _long_hash(v)
    if isinstance(v, float):
        return _double_hash(v)
    if isinstance(v, str):
        return _string_hash(v)
    return 0  # no Java equivalent known: same bucket, so insertion order


_HASH_BY_TYPE: dict[str, Callable[[Any], int]] = {
    "STRING": _string_hash,
    "CHAR": lambda v: _string_hash(v[:1]),
    "BYTE": _int32,
    "SHORT": _int32,
    "INT": _int32,
    "LONG": _long_hash,
    "BOOLEAN": lambda v: 1231 if v else 1237,
    "FLOAT": _float_hash,
    "DOUBLE": _double_hash,
    "BIG_INT": _big_integer_hash,
}


def java_hash_code(value: Any, type_info: Any = None) -> int:
    """Java's ``hashCode`` of ``value`` as the declared basic type (unsigned 32-bit); 0 for
    types whose hash sparkpoint does not model (``HashMap`` then keeps insertion order)."""
    if value is None:
        return 0
    if isinstance(type_info, BasicTypeInfo):
        fn = _HASH_BY_TYPE.get(type_info.type_name)
        return fn(value) if fn is not None else 0
    return _value_hash(value)


def hash_map_order(keys: list[Any], key_type: Any = None) -> list[Any]:
    """The order a ``java.util.HashMap`` built as ``new HashMap<>(n)`` and filled with
    ``keys`` in this order iterates them (what Flink's ``MapSerializer`` deserialises)."""
    n = len(keys)
    capacity = 1
    while capacity < n:
        capacity <<= 1
    while n > int(capacity * 0.75):  # resizes while filling: size > threshold doubles it
        capacity <<= 1
    mask = capacity - 1

    def bucket(k: Any) -> int:
        h = java_hash_code(k, key_type)
        return (h ^ (h >> 16)) & mask

    indexed = sorted(range(n), key=lambda i: (bucket(keys[i]), i))
    return [keys[i] for i in indexed]


# --- toString ----------------------------------------------------------------------------


def _sql_time(t: datetime.time) -> str:
    return f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}"


def _sql_timestamp(ts: datetime.datetime) -> str:
    nanos = ts.microsecond * 1000
    frac = str(nanos).rjust(9, "0").rstrip("0") or "0"
    return (
        f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d} "
        f"{ts.hour:02d}:{ts.minute:02d}:{ts.second:02d}.{frac}"
    )


def _instant(ts: Any) -> str:
    if not isinstance(ts, datetime.datetime):
        return str(ts)
    if ts.tzinfo is not None:
        ts = ts.astimezone(datetime.UTC).replace(tzinfo=None)
    text = ts.strftime("%Y-%m-%dT%H:%M:%S")
    micros = ts.microsecond
    if micros:
        text += "." + (f"{micros // 1000:03d}" if micros % 1000 == 0 else f"{micros:06d}")
    return text + "Z"


def _java_array(value: Any, element: Any) -> str:
    """A Java array's ``toString`` is its identity (``[I@1b6d3586``), which no program can
    reproduce: Java's element type code, then the Python object's id in hex."""
    code = {
        "INT": "[I",
        "LONG": "[J",
        "SHORT": "[S",
        "BYTE": "[B",
        "FLOAT": "[F",
        "DOUBLE": "[D",
        "BOOLEAN": "[Z",
        "CHAR": "[C",
    }
    name = element.type_name if isinstance(element, BasicTypeInfo) else ""
    prefix = code.get(name, "[Ljava.lang.Object;")
    return f"{prefix}@{id(value) & 0x7FFFFFFF:x}"


def _basic_string(value: Any, type_name: str) -> str:
    if type_name == "FLOAT":
        return java_float_string(float(value))
    if type_name == "DOUBLE":
        return java_double_string(float(value))
    if type_name == "BOOLEAN":
        return "true" if value else "false"
    if type_name == "SQL_TIME" and isinstance(value, datetime.time):
        return _sql_time(value)
    if type_name == "SQL_TIMESTAMP" and isinstance(value, datetime.datetime):
        return _sql_timestamp(value)
    if type_name == "INSTANT":
        return _instant(value)
    return _untyped_string(value)


def java_string(value: Any, type_info: Any = None) -> str:
    """Java's ``toString`` of ``value`` as the declared type (``Types.*``); without a type,
    of the Java value the Python one would become (``float`` as ``Double``)."""
    if value is None:
        return "null"
    if isinstance(type_info, BasicTypeInfo):
        return _basic_string(value, type_info.type_name)
    if isinstance(type_info, RowTypeInfo) and isinstance(value, (tuple, list)):
        kind = value.get_row_kind().short_string() if isinstance(value, Row) else "+I"
        fields = ", ".join(java_string(v, t) for v, t in zip(value, type_info.field_types))
        return f"{kind}[{fields}]"
    if isinstance(type_info, TupleTypeInfo) and isinstance(value, (tuple, list)):
        return "(" + ",".join(java_string(v, t) for v, t in zip(value, type_info.field_types)) + ")"
    if isinstance(type_info, ListTypeInfo) and isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_string(v, type_info.element) for v in value) + "]"
    if isinstance(type_info, (BasicArrayTypeInfo, PrimitiveArrayTypeInfo)):
        return _java_array(value, type_info.element)
    if isinstance(type_info, MapTypeInfo) and isinstance(value, dict):
        key_type, value_type = type_info.key_type, type_info.value_type
        keys = hash_map_order(list(value), key_type)
        return (
            "{"
            + ", ".join(
                f"{java_string(k, key_type)}={java_string(value[k], value_type)}" for k in keys
            )
            + "}"
        )
    return _untyped_string(value)


def _untyped_string(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_string(value)
    if isinstance(value, Row):
        kind = value.get_row_kind().short_string()
        return f"{kind}[{', '.join(_untyped_string(v) for v in value)}]"
    if isinstance(value, tuple):
        return "(" + ",".join(_untyped_string(v) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_untyped_string(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = hash_map_order(list(value))
        return (
            "{" + ", ".join(f"{_untyped_string(k)}={_untyped_string(value[k])}" for k in keys) + "}"
        )
    return str(value)
