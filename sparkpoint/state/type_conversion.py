"""Values as PyFlink's coders hand them back after a trip through Java.

Where a PyFlink record crosses from Python to Java and back (a source with ``type_info``, a
shuffle, a sink), its declared type decides what the next function sees: ``Types.ROW``
values become ``Row`` objects (field names set), ``Types.FLOAT`` rounds to a 32-bit float,
out-of-range ``BYTE``/``SHORT``/``INT``/``LONG`` fail, ``SQL_TIME`` keeps milliseconds,
lists/maps/tuples are rebuilt with converted elements. ``batch_converter`` compiles a type
into a function over a whole batch (column-wise, vectorised with NumPy where it can); it is
``None`` for untyped (pickled) records, which cross unchanged.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from sparkpoint.state.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)
from sparkpoint.types import Row, RowKind, rows_of

__all__ = ["BatchConverter", "batch_converter", "convert_value"]

BatchConverter = Callable[[list[Any]], list[Any]]

_INT_RANGES = {
    "BYTE": (-(2**7), 2**7 - 1, "int8_t"),
    "SHORT": (-(2**15), 2**15 - 1, "int16_t"),
    "INT": (-(2**31), 2**31 - 1, "int32_t"),
    "LONG": (-(2**63), 2**63 - 1, "int64_t"),
}


def batch_converter(type_info: Any) -> BatchConverter | None:
    """A function converting a batch of values of ``type_info`` as a Java round trip would;
    ``None`` when values cross unchanged (no type, ``PICKLED_BYTE_ARRAY``, strings)."""
    if type_info is None or not isinstance(type_info, TypeInformation):
        return None
    cached = type_info.__dict__.get("_batch_converter", False)
    if cached is False:
        cached = _compile(type_info)
        type_info.__dict__["_batch_converter"] = cached
    return cached  # type: ignore[no-any-return]


def convert_value(value: Any, type_info: Any) -> Any:
    """One value converted as ``batch_converter`` converts batches."""
    conv = batch_converter(type_info)
    return value if conv is None else conv([value])[0]


def _compile(ti: TypeInformation) -> BatchConverter | None:
    if isinstance(ti, PickledBytesTypeInfo):
        return None
    if isinstance(ti, BasicTypeInfo):
        return _basic(ti.type_name)
    if isinstance(ti, RowTypeInfo):
        return _row(ti)
    if isinstance(ti, TupleTypeInfo):
        return _tuple(ti)
    if (
        isinstance(ti, PrimitiveArrayTypeInfo)
        and isinstance(ti.element, BasicTypeInfo)
        and ti.element.type_name == "BYTE"
    ):
        return _nullable(lambda vs: [bytes(v) for v in vs])
    if isinstance(ti, (ListTypeInfo, BasicArrayTypeInfo, PrimitiveArrayTypeInfo)):
        return _list(batch_converter(ti.element))
    if isinstance(ti, MapTypeInfo):
        return _map(batch_converter(ti.key_type), batch_converter(ti.value_type))
    return None


def _nullable(conv: BatchConverter) -> BatchConverter:
    """``conv`` applied to the non-null values only (nulls stay null)."""

    def run(values: list[Any]) -> list[Any]:
        if None not in values:
            return conv(values)
        idx = [i for i, v in enumerate(values) if v is not None]
        out = list(values)
        for i, v in zip(idx, conv([values[i] for i in idx])):
            out[i] = v
        return out

    return run


def _basic(name: str) -> BatchConverter | None:
    if name in _INT_RANGES:
        return _nullable(_integers(*_INT_RANGES[name]))
    if name == "FLOAT":
        return _nullable(_floats32)
    if name == "DOUBLE":
        return _nullable(_doubles)
    if name == "BOOLEAN":
        return _nullable(lambda vs: [bool(v) for v in vs])
    if name == "BIG_DEC":
        return _nullable(
            lambda vs: [
                v if isinstance(v, decimal.Decimal) else decimal.Decimal(str(v)) for v in vs
            ]
        )
    if name == "SQL_DATE":
        return _nullable(lambda vs: [_date(v) for v in vs])
    if name == "SQL_TIME":
        return _nullable(lambda vs: [_time(v) for v in vs])
    return None  # STRING, CHAR, BIG_INT, SQL_TIMESTAMP, INSTANT: unchanged


def _integers(lo: int, hi: int, c_name: str) -> BatchConverter:
    def run(values: list[Any]) -> list[Any]:
        kinds = set(map(type, values))
        if not kinds <= {int, bool}:
            bad = next(v for v in values if not isinstance(v, int))
            raise TypeError(
                f"a value declared as {c_name} must be an int, got {type(bad).__name__} {bad!r}"
            )
        if values and (min(values) < lo or max(values) > hi):
            raise OverflowError(f"value too large to convert to {c_name}")
        return [int(v) for v in values] if bool in kinds else values

    return run


def _floats32(values: list[Any]) -> list[Any]:
    with np.errstate(over="ignore"):  # beyond the float range: +-inf, as Java's cast
        arr = np.asarray(values, dtype=np.float64).astype(np.float32)
    return arr.astype(np.float64).tolist()  # type: ignore[no-any-return]


def _doubles(values: list[Any]) -> list[Any]:
    if set(map(type, values)) <= {float}:
        return values
    return np.asarray(values, dtype=np.float64).tolist()  # type: ignore[no-any-return]


def _date(v: Any) -> datetime.date:
    if isinstance(v, datetime.datetime):
        return v.date()
    return v  # type: ignore[no-any-return]


def _time(v: Any) -> datetime.time:
    if isinstance(v, datetime.time) and v.microsecond % 1000:
        return v.replace(microsecond=v.microsecond - v.microsecond % 1000)
    return v  # type: ignore[no-any-return]


def _columns(
    values: list[Any], arity: int, what: str, fields: list[str] | None = None
) -> list[list[Any]]:
    """The batch transposed into ``arity`` columns (named rows picked by field name)."""
    if set(map(type, values)) <= {tuple, list} and set(map(len, values)) <= {arity}:
        rows = values  # the common case, checked and transposed at C speed
    else:
        rows = [_fields_of(v, arity, what, fields) for v in values]
    # itemgetter per column: no per-record objects (zip(*rows) would make one per record)
    return [list(map(itemgetter(i), rows)) for i in range(arity)]


def _fields_of(v: Any, arity: int, what: str, fields: list[str] | None) -> Any:
    if isinstance(v, Row) and fields is not None:
        names = v.get_field_names()
        if names is not None and names != fields and set(fields) <= set(names):
            v = v.get_fields_by_names(fields)
    if not isinstance(v, (tuple, list)) or len(v) != arity:
        raise TypeError(f"a {what} of {arity} fields expected, got {v!r}")
    return v


def _convert_columns(columns: list[list[Any]], convs: list[BatchConverter | None]) -> None:
    """Convert the columns in place; a converter with nothing to change returns its input
    list itself, which ``_tuple`` uses to keep the batch as it is."""
    for i, conv in enumerate(convs):
        if conv is not None:
            columns[i] = conv(columns[i])


def _row(ti: RowTypeInfo) -> BatchConverter:
    names = tuple(ti.field_names)
    fields = list(names)
    convs = [
        _nullable(c) if (c := batch_converter(t)) is not None else None for t in ti.field_types
    ]
    arity = len(names)

    def run(values: list[Any]) -> list[Any]:
        kinds = None
        if Row in set(map(type, values)):
            kinds = [v.get_row_kind() if isinstance(v, Row) else RowKind.INSERT for v in values]
        columns = _columns(values, arity, "Row", fields)
        _convert_columns(columns, convs)
        return rows_of(zip(*columns) if arity else [()] * len(values), names, kinds)

    return _nullable(run)


def _tuple(ti: TupleTypeInfo) -> BatchConverter | None:
    convs = [
        _nullable(c) if (c := batch_converter(t)) is not None else None for t in ti.field_types
    ]
    arity = len(convs)

    def run(values: list[Any]) -> list[Any]:
        columns = _columns(values, arity, "tuple")
        originals = list(columns)
        _convert_columns(columns, convs)
        if set(map(type, values)) <= {tuple} and all(a is b for a, b in zip(originals, columns)):
            return values  # every field was valid as it was: no new tuples (and no GC work)
        return list(zip(*columns)) if arity else [() for _ in values]

    return _nullable(run)


def _list(elem: BatchConverter | None) -> BatchConverter:
    conv = _nullable(elem) if elem is not None else None

    def run(values: list[Any]) -> list[Any]:
        if conv is None:
            return [list(v) for v in values]
        flat = [e for v in values for e in v]
        converted = conv(flat)
        out, at = [], 0
        for v in values:
            n = len(v)
            out.append(converted[at : at + n])
            at += n
        return out

    return _nullable(run)


def _map(key: BatchConverter | None, value: BatchConverter | None) -> BatchConverter:
    kconv = _nullable(key) if key is not None else None
    vconv = _nullable(value) if value is not None else None

    def run(values: list[Any]) -> list[Any]:
        keys = [k for m in values for k in m]
        vals = [m[k] for m in values for k in m]
        if kconv is not None:
            keys = kconv(keys)
        if vconv is not None:
            vals = vconv(vals)
        out, at = [], 0
        for m in values:
            n = len(m)
            out.append(dict(zip(keys[at : at + n], vals[at : at + n])))
            at += n
        return out

    return _nullable(run)
