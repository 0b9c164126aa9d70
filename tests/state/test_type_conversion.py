"""Values converted by their declared type as a PyFlink trip through Java converts them."""

from __future__ import annotations

import datetime
import decimal
import math

import pytest

from sparkpoint.common import Row, Types
from sparkpoint.state.type_conversion import batch_converter, convert_value
from sparkpoint.types import RowKind


def test_untyped_and_pass_through_types_have_no_converter() -> None:
    for ti in (
        None,
        Types.PICKLED_BYTE_ARRAY(),
        Types.STRING(),
        Types.BIG_INT(),
        Types.SQL_TIMESTAMP(),
        "not a type",
    ):
        assert batch_converter(ti) is None
    t = Types.TUPLE([Types.LONG(), Types.LONG()])
    assert batch_converter(t) is batch_converter(t)  # compiled once per type object


def test_float_rounds_to_32_bits() -> None:
    conv = batch_converter(Types.FLOAT())
    assert conv is not None
    out = conv([0.1, 110.1, 16777217.0, 3.4e38, 1e-46, -2.5, 7, 1.79e308, -0.0])
    assert out[:7] == [
        0.10000000149011612,
        110.0999984741211,
        16777216.0,
        3.3999999521443642e38,
        0.0,
        -2.5,
        7.0,
    ]
    assert out[7] == math.inf and math.copysign(1, out[8]) == -1
    assert all(type(v) is float for v in out)
    assert conv([None, 0.1]) == [None, 0.10000000149011612]


def test_double_keeps_precision_and_makes_floats() -> None:
    values = [0.1, 1 / 3]
    assert (
        convert_value(3, Types.DOUBLE()) == 3.0 and type(convert_value(3, Types.DOUBLE())) is float
    )
    conv = batch_converter(Types.DOUBLE())
    assert conv is not None and conv(values) is values  # nothing to do: the batch itself


@pytest.mark.parametrize(
    "name, lo, hi, c_name",
    [
        ("BYTE", -128, 127, "int8_t"),
        ("SHORT", -32768, 32767, "int16_t"),
        ("INT", -(2**31), 2**31 - 1, "int32_t"),
        ("LONG", -(2**63), 2**63 - 1, "int64_t"),
    ],
)
def test_integers_in_range_pass_out_of_range_fail(name: str, lo: int, hi: int, c_name: str) -> None:
    ti = getattr(Types, name)()
    conv = batch_converter(ti)
    assert conv is not None
    assert conv([lo, 0, hi]) == [lo, 0, hi]
    assert conv([True, None]) == [1, None] and type(conv([True])[0]) is int
    for bad in (hi + 1, lo - 1):
        with pytest.raises(OverflowError, match=f"value too large to convert to {c_name}"):
            conv([0, bad])
    with pytest.raises(TypeError, match=f"{c_name} must be an int, got str 'x'"):
        conv([1, "x"])


def test_rows_get_field_names_kinds_and_converted_fields() -> None:
    positional = Types.ROW([Types.INT(), Types.FLOAT()])
    r = convert_value((1, 0.1), positional)
    assert isinstance(r, Row) and r.get_field_names() == ["f0", "f1"]
    assert r == Row(f0=1, f1=0.10000000149011612) and r.f1 == r[1] == r["f1"]
    address = Types.ROW_NAMED(["city", "zip"], [Types.STRING(), Types.INT()])
    person = Types.ROW_NAMED(["name", "address"], [Types.STRING(), address])
    p = convert_value(["ann", ("Oslo", 150)], person)
    assert p.address.city == "Oslo" and repr(p) == (
        "Row(name='ann', address=Row(city='Oslo', zip=150))"
    )
    assert p.as_dict(recursive=True) == {"name": "ann", "address": {"city": "Oslo", "zip": 150}}
    # a named row in another field order is read by name; the kind survives
    deleted = Row(address=None, name="bob")
    deleted.set_row_kind(RowKind.DELETE)
    q = convert_value(deleted, person)
    assert list(q) == ["bob", None] and q.get_row_kind() is RowKind.DELETE
    with pytest.raises(TypeError, match="a Row of 2 fields expected"):
        convert_value((1, 2, 3), positional)
    with pytest.raises(OverflowError):
        convert_value((2**40, 0.0), positional)
    assert convert_value(None, positional) is None


def test_tuples_lists_maps_and_arrays() -> None:
    t = convert_value(
        (1, [0.1, None], {"a": 0.1}),
        Types.TUPLE(
            [
                Types.LONG(),
                Types.BASIC_ARRAY(Types.FLOAT()),
                Types.MAP(Types.STRING(), Types.FLOAT()),
            ]
        ),
    )
    assert t == (1, [0.10000000149011612, None], {"a": 0.10000000149011612})
    assert type(t) is tuple
    conv = batch_converter(Types.LIST(Types.INT()))
    assert conv is not None and conv([[1, 2], [], (3,)]) == [[1, 2], [], [3]]
    with pytest.raises(OverflowError):
        conv([[1], [2**31]])
    assert convert_value([1, 2, 255], Types.PRIMITIVE_ARRAY(Types.BYTE())) == b"\x01\x02\xff"
    nested = Types.MAP(Types.STRING(), Types.LIST(Types.ROW([Types.INT()])))
    assert convert_value({"k": [(1,), (2,)]}, nested) == {"k": [Row(f0=1), Row(f0=2)]}
    assert convert_value(
        ("x", (1, "y")), Types.TUPLE([Types.STRING(), Types.TUPLE([Types.INT(), Types.STRING()])])
    ) == ("x", (1, "y"))


def test_decimal_and_temporal_values() -> None:
    assert convert_value(1.5, Types.BIG_DEC()) == decimal.Decimal("1.5")
    d = decimal.Decimal("1.10")
    assert convert_value(d, Types.BIG_DEC()) is d
    assert convert_value(datetime.time(13, 5, 7, 250999), Types.SQL_TIME()) == datetime.time(
        13, 5, 7, 250000
    )
    assert convert_value(datetime.datetime(2024, 2, 29, 12), Types.SQL_DATE()) == datetime.date(
        2024, 2, 29
    )
    assert (
        convert_value(True, Types.BOOLEAN()) is True and convert_value(0, Types.BOOLEAN()) is False
    )


def test_row_repr_and_kind_as_pyflink_prints_them() -> None:
    assert repr(Row(1, "x")) == "<Row(1, 'x')>"
    assert str(Row(a=1)) == "Row(a=1)"
    assert str(RowKind.UPDATE_BEFORE) == "-U"
