"""State types as DataFrame columns: serializer configs, type information and Arrow types.

A snapshot header records every state's serializers as JSON configs
(``TypeSerializer.snapshot_config()``). Here they become type information (``Types``), the
Arrow type of a column, and the conversions between the Python objects a serializer reads
or writes and the values of an Arrow column (a Spark DataFrame crosses to Python as Arrow).
Plain Python; no Spark.

Pickled (untyped) values have no column type of their own: without a type hint they are a
``binary`` column of the pickle bytes. With a hint (a ``TypeInformation`` the unpickled
objects conform to) they are decoded into a typed column, and a typed column is pickled
value by value on the way back.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from sparkpoint.state import typeinfo as ti
from sparkpoint.state.descriptors import StateKind
from sparkpoint.state.serializers import serializer_from_config
from sparkpoint.types import Row

__all__ = [
    "PICKLED",
    "PICKLED_METADATA",
    "arrow_type",
    "column_configs",
    "from_arrow",
    "is_pickled",
    "raw_pickle_config",
    "state_column_type",
    "to_arrow",
    "type_info_from_config",
]

PICKLED = "PICKLED_BYTE_ARRAY"
PICKLED_METADATA = "sparkpoint.pickled"
"""Spark field metadata key marking a column whose binary values are pickle bytes, as read
from untyped state; the writer stores such values as they are instead of pickling them."""


def type_info_from_config(config: Any) -> ti.TypeInformation:
    """The type information whose serializer has the snapshot config ``config``."""
    if isinstance(config, str):
        if config == PICKLED:
            return ti.PickledBytesTypeInfo()
        if config == "BYTES":
            return ti.PrimitiveArrayTypeInfo(ti.BasicTypeInfo("BYTE"))
        serializer_from_config(config)  # refuses unknown names with a clear error
        return ti.BasicTypeInfo(config)
    if isinstance(config, dict):
        kind = config.get("type")
        if kind == "LIST":
            return ti.ListTypeInfo(type_info_from_config(config["element"]))
        if kind == "PRIMITIVE_ARRAY":
            return ti.PrimitiveArrayTypeInfo(type_info_from_config(config["element"]))
        if kind == "BASIC_ARRAY":
            return ti.BasicArrayTypeInfo(type_info_from_config(config["element"]))
        if kind == "MAP":
            return ti.MapTypeInfo(
                type_info_from_config(config["key"]), type_info_from_config(config["value"])
            )
        if kind == "TUPLE":
            return ti.TupleTypeInfo([type_info_from_config(f) for f in config["fields"]])
        if kind == "ROW":
            return ti.RowTypeInfo(
                [type_info_from_config(f) for f in config["fields"]], config.get("names")
            )
    raise ValueError(f"Unknown serializer config {config!r}")


def raw_pickle_config(config: Any) -> Any:
    """``config`` with every pickled part read as its pickle bytes (``BYTES``): the canonical
    encoding of a pickled value is exactly the ``BYTES`` encoding of its pickle."""
    if config == PICKLED:
        return "BYTES"
    if isinstance(config, dict):
        out = dict(config)
        for part in ("element", "key", "value"):
            if part in out:
                out[part] = raw_pickle_config(out[part])
        if "fields" in out:
            out["fields"] = [raw_pickle_config(f) for f in out["fields"]]
        return out
    return config


def column_configs(recorded: Any, hint: Any, what: str) -> tuple[Any, Any, bool]:
    """``(decode config, column config, raw)`` of values recorded as ``recorded``.

    A pickled part is decoded with the ``hint`` (a serializer config) when one is given for
    it, else kept as its pickle bytes (``raw`` is then true). A hint for a typed part must
    name the recorded type. ``what`` names the state in errors.
    """
    if recorded == PICKLED:
        if hint is None or hint == PICKLED:
            return "BYTES", "BYTES", True
        return PICKLED, hint, False
    if hint is None or hint == recorded:
        raw = raw_pickle_config(recorded)
        return raw, raw, raw != recorded
    if (
        isinstance(recorded, dict)
        and isinstance(hint, dict)
        and recorded.get("type") == hint.get("type")
    ):
        dec, col = dict(recorded), dict(recorded)
        raw = False
        for part in ("element", "key", "value"):
            if part in recorded:
                dec[part], col[part], r = column_configs(recorded[part], hint.get(part), what)
                raw = raw or r
        if "fields" in recorded:
            hints = hint.get("fields") or [None] * len(recorded["fields"])
            if len(hints) != len(recorded["fields"]):
                raise ValueError(
                    f"{what}: the type hint has {len(hints)} fields, the state "
                    f"{len(recorded['fields'])}"
                )
            parts = [column_configs(r, h, what) for r, h in zip(recorded["fields"], hints)]
            dec["fields"] = [p[0] for p in parts]
            col["fields"] = [p[1] for p in parts]
            raw = raw or any(p[2] for p in parts)
            if "names" in hint:
                col["names"] = hint["names"]
        return dec, col, raw
    raise ValueError(
        f"{what} is typed ({recorded}); a type hint applies only to pickled "
        f"(untyped) values, and {hint} differs from the recorded type"
    )


def is_pickled(info: ti.TypeInformation) -> bool:
    """Whether values of ``info`` are pickled (untyped state)."""
    return isinstance(info, ti.PickledBytesTypeInfo)


def _config(info: ti.TypeInformation) -> Any:
    return info.get_serializer().snapshot_config()


def arrow_type(info: ti.TypeInformation) -> pa.DataType:
    """The Arrow type of a column of ``info`` values (pickled values: ``binary``), with
    microsecond timestamps, as Spark has them."""
    return _microseconds(info.to_arrow_type())


def _microseconds(typ: pa.DataType) -> pa.DataType:
    t = pa.types
    if t.is_timestamp(typ) and typ.unit == "ns":
        return pa.timestamp("us", typ.tz)
    if t.is_list(typ):
        return pa.list_(_microseconds(typ.value_type))
    if t.is_map(typ):
        return pa.map_(_microseconds(typ.key_type), _microseconds(typ.item_type))
    if t.is_struct(typ):
        return pa.struct(
            [
                pa.field(typ.field(i).name, _microseconds(typ.field(i).type))
                for i in range(typ.num_fields)
            ]
        )
    return typ


def state_column_type(
    kind: StateKind, value: ti.TypeInformation, user_key: ti.TypeInformation | None
) -> ti.TypeInformation:
    """The type of a state's column: the value, a list of values (LIST) or a map (MAP)."""
    if kind is StateKind.LIST:
        return ti.ListTypeInfo(value)
    if kind is StateKind.MAP:
        if user_key is None:
            raise ValueError("A MAP state needs the type of its map keys")
        return ti.MapTypeInfo(user_key, value)
    return value


# -- Python objects -> Arrow (reading state) --------------------------------------------


def _identity(v: Any) -> Any:
    return v


def _to_arrow_value(info: ti.TypeInformation) -> Callable[[Any], Any]:
    """A function turning a deserialized value into what ``pa.array`` takes for its type."""
    cfg = _config(info)
    if cfg == "BIG_INT":
        return lambda v: None if v is None else Decimal(v)
    if cfg == "BIG_DEC":
        return lambda v: None if v is None else str(v)
    if isinstance(cfg, str):
        return _identity
    if isinstance(info, ti.ListTypeInfo | ti.BasicArrayTypeInfo | ti.PrimitiveArrayTypeInfo):
        elem = _to_arrow_value(info.element)
        if elem is _identity:
            return _identity
        return lambda v: None if v is None else [elem(e) for e in v]
    if isinstance(info, ti.MapTypeInfo):
        k, val = _to_arrow_value(info.key_type), _to_arrow_value(info.value_type)
        return lambda v: None if v is None else [(k(a), val(b)) for a, b in v.items()]
    fields = [_to_arrow_value(t) for t in info.field_types]  # type: ignore[attr-defined]
    return lambda v: None if v is None else tuple(f(x) for f, x in zip(fields, v))


def to_arrow(values: list[Any], info: ti.TypeInformation) -> pa.Array:
    """An Arrow array of ``arrow_type(info)`` from deserialized values (``None`` = null)."""
    typ = arrow_type(info)
    convert = _to_arrow_value(info)
    converted = values if convert is _identity else [convert(v) for v in values]
    try:
        return pa.array(converted, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
        bad = next((v for v, c in zip(values, converted) if not _fits(c, typ)), None)
        raise ValueError(
            f"Value {bad!r} does not fit the column type {typ} of {info!r}: {e}"
        ) from e


def _fits(value: Any, typ: pa.DataType) -> bool:
    try:
        pa.array([value], typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return False
    return True


# -- Arrow -> Python objects (writing state) --------------------------------------------


def _from_arrow_value(info: ti.TypeInformation) -> Callable[[Any], Any]:
    """A function turning one ``to_pylist()`` value into the object the serializer takes."""
    cfg = _config(info)
    if cfg == "BIG_INT":
        return lambda v: None if v is None else int(v)
    if cfg == "BIG_DEC":
        return lambda v: None if v is None else Decimal(v)
    if cfg == "INSTANT":
        return lambda v: v if v is None or v.tzinfo else v.replace(tzinfo=dt.UTC)
    if isinstance(cfg, str):
        return _identity
    if isinstance(info, ti.ListTypeInfo | ti.BasicArrayTypeInfo | ti.PrimitiveArrayTypeInfo):
        elem = _from_arrow_value(info.element)
        return lambda v: None if v is None else [elem(e) for e in v]
    if isinstance(info, ti.MapTypeInfo):
        k, val = _from_arrow_value(info.key_type), _from_arrow_value(info.value_type)
        return lambda v: None if v is None else {k(a): val(b) for a, b in v}
    fields = [_from_arrow_value(t) for t in info.field_types]  # type: ignore[attr-defined]

    def values(v: Any) -> list[Any]:
        items = v.values() if isinstance(v, dict) else v
        return [f(x) for f, x in zip(fields, items)]

    if isinstance(info, ti.RowTypeInfo):
        names = cfg.get("names")
        if names is not None:
            return lambda v: None if v is None else Row(**dict(zip(names, values(v))))
        return lambda v: None if v is None else Row(*values(v))
    return lambda v: None if v is None else tuple(values(v))


def _plain(typ: pa.DataType) -> Callable[[Any], Any]:
    """Conversion of values without type information: structs become tuples, maps dicts."""
    if pa.types.is_struct(typ):
        fields = [_plain(typ.field(i).type) for i in range(typ.num_fields)]
        return lambda v: None if v is None else tuple(f(x) for f, x in zip(fields, v.values()))
    if pa.types.is_map(typ):
        k, val = _plain(typ.key_type), _plain(typ.item_type)
        return lambda v: None if v is None else {k(a): val(b) for a, b in v}
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        elem = _plain(typ.value_type)
        if elem is _identity:
            return _identity
        return lambda v: None if v is None else [elem(e) for e in v]
    return _identity


def from_arrow(column: pa.Array | pa.ChunkedArray, info: ti.TypeInformation | None) -> list[Any]:
    """The Python objects of an Arrow column as the serializer of ``info`` takes them;
    ``info`` ``None`` or pickled: the plain objects (structs as tuples, maps as dicts)."""
    values = column.to_pylist()
    if info is None or is_pickled(info):
        convert = _plain(column.type)
    else:
        convert = _from_arrow_value(info)
    if convert is _identity:
        return values
    return [convert(v) for v in values]
