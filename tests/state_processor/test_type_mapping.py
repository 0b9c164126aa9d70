"""State types as columns: serializer configs back to type information, Arrow types, and
values through Arrow and back into what the serializers write, for every type."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from sparkpoint.state.typeinfo import Types
from sparkpoint.state_processor.type_mapping import (
    arrow_type,
    column_configs,
    from_arrow,
    raw_pickle_config,
    to_arrow,
    type_info_from_config,
)
from sparkpoint.types import Row

UTC = dt.UTC
CASES: list[tuple[Any, list[Any], str]] = [
    (Types.STRING(), ["a", "é", None], "string"),
    (Types.BYTE(), [-128, 127], "int8"),
    (Types.BOOLEAN(), [True, False], "bool"),
    (Types.SHORT(), [-(2**15)], "int16"),
    (Types.INT(), [2**31 - 1], "int32"),
    (Types.LONG(), [-(2**63)], "int64"),
    (Types.FLOAT(), [1.5], "float"),
    (Types.DOUBLE(), [2.25], "double"),
    (Types.CHAR(), ["x"], "string"),
    (Types.BIG_INT(), [10**30, -7], "decimal128(38, 0)"),
    (Types.BIG_DEC(), [Decimal("1.000000000000000000000000000001")], "string"),
    (Types.INSTANT(), [dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)], "timestamp[us, tz=UTC]"),
    (Types.SQL_DATE(), [dt.date(1999, 12, 31)], "date32[day]"),
    (Types.SQL_TIME(), [dt.time(23, 59, 59, 999999)], "time64[us]"),
    (Types.SQL_TIMESTAMP(), [dt.datetime(2024, 2, 29, 1, 2, 3)], "timestamp[us]"),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), [b"\x00\xff"], "binary"),
    (Types.PRIMITIVE_ARRAY(Types.INT()), [[1, 2]], "list<item: int32>"),
    (Types.BASIC_ARRAY(Types.STRING()), [["a", None]], "list<item: string>"),
    (Types.LIST(Types.LONG()), [[1, None, 3]], "list<item: int64>"),
    (
        Types.MAP(Types.STRING(), Types.LIST(Types.INT())),
        [{"a": [1], "b": None}],
        "map<string, list<item: int32>>",
    ),
    (
        Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()]),
        [Row(a=1, b=None)],
        "struct<a: int32, b: string>",
    ),
    (
        Types.ROW([Types.INT(), Types.BIG_INT()]),
        [Row(1, 2**70)],
        "struct<f0: int32, f1: decimal128(38, 0)>",
    ),
    (Types.TUPLE([Types.STRING(), Types.DOUBLE()]), [("x", 0.5)], "struct<f0: string, f1: double>"),
    (Types.PICKLED_BYTE_ARRAY(), [b"raw"], "binary"),
]


@pytest.mark.parametrize(("info", "values", "arrow"), CASES, ids=[c[2] for c in CASES])
def test_values_cross_arrow_and_encode_as_before(info: Any, values: list[Any], arrow: str) -> None:
    cfg = info.get_serializer().snapshot_config()
    back = type_info_from_config(cfg)
    assert back.get_serializer().snapshot_config() == cfg
    assert str(arrow_type(back)) == arrow
    column = to_arrow(values, back)
    assert str(column.type) == arrow
    objects = from_arrow(column, back)
    ser = info.get_serializer()
    assert [ser.serialize(o) for o in objects if o is not None] == [
        ser.serialize(v) for v in values if v is not None
    ]
    if isinstance(values[0], Row):
        assert objects == values  # names and field order survive


def test_values_that_do_not_fit_the_column_are_named() -> None:
    with pytest.raises(ValueError, match="Value 340282366920938463463374607431768211456"):
        to_arrow([1, 2**128], Types.BIG_INT())


def test_plain_conversion_without_type() -> None:
    col = pa.array(
        [{"a": 1, "m": [("k", {"x": 2})]}],
        pa.struct([("a", pa.int64()), ("m", pa.map_(pa.string(), pa.struct([("x", pa.int64())])))]),
    )
    assert from_arrow(col, None) == [(1, {"k": (2,)})]
    assert from_arrow(col, Types.PICKLED_BYTE_ARRAY()) == [(1, {"k": (2,)})]


def test_column_configs_decode_pickled_parts_raw_or_with_a_hint() -> None:
    recorded = {"type": "MAP", "key": "PICKLED_BYTE_ARRAY", "value": "LONG"}
    assert raw_pickle_config(recorded) == {"type": "MAP", "key": "BYTES", "value": "LONG"}
    assert column_configs(recorded, None, "s") == (
        raw_pickle_config(recorded),
        raw_pickle_config(recorded),
        True,
    )
    hint = {"type": "MAP", "key": "STRING", "value": "LONG"}
    assert column_configs(recorded, hint, "s") == (recorded, hint, False)
    with pytest.raises(ValueError, match="s is typed"):
        column_configs("LONG", "STRING", "s")
    with pytest.raises(ValueError, match="Unknown serializer"):
        type_info_from_config("NOPE")
