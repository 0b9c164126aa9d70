"""Serializers: exact encodings, round trips for every Types entry, config rebuild."""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.common.typeinfo import Types
from sparkpoint.state.serializers import (
    PickleSerializer,
    read_varint,
    serializer_from_config,
    write_varint,
)
from sparkpoint.types import Row, RowKind


def test_exact_encodings() -> None:
    assert Types.INT().get_serializer().serialize(1) == b"\x00\x00\x00\x01"
    assert Types.LONG().get_serializer().serialize(-2) == b"\xff" * 7 + b"\xfe"
    assert Types.STRING().get_serializer().serialize("hé") == b"\x03h\xc3\xa9"
    assert Types.BOOLEAN().get_serializer().serialize(True) == b"\x01"
    assert Types.PRIMITIVE_ARRAY(Types.BYTE()).get_serializer().serialize(b"ab") == b"\x02ab"
    assert Types.LIST(Types.SHORT()).get_serializer().serialize([1, None]) == (
        b"\x02\x01\x00\x01\x00"
    )
    row = Types.ROW([Types.INT(), Types.STRING()]).get_serializer()
    assert row.serialize(Row(None, "x")) == b"\x01\x01x"
    assert Types.SQL_DATE().get_serializer().serialize(dt.date(1970, 1, 2)) == b"\x00\x00\x00\x01"


def test_varint() -> None:
    for n in (0, 1, 127, 128, 300, 2**35):
        out = bytearray()
        write_varint(n, out)
        assert read_varint(out, 0) == (n, len(out))
    out = bytearray()
    write_varint(300, out)
    assert bytes(out) == b"\xac\x02"


CASES = [
    (Types.STRING(), st.text()),
    (Types.BYTE(), st.integers(-128, 127)),
    (Types.BOOLEAN(), st.booleans()),
    (Types.SHORT(), st.integers(-(2**15), 2**15 - 1)),
    (Types.INT(), st.integers(-(2**31), 2**31 - 1)),
    (Types.LONG(), st.integers(-(2**63), 2**63 - 1)),
    (Types.DOUBLE(), st.floats(allow_nan=False)),
    (Types.FLOAT(), st.floats(width=32, allow_nan=False)),
    (Types.CHAR(), st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",))),
    (Types.BIG_INT(), st.integers(-(2**200), 2**200)),
    (Types.BIG_DEC(), st.decimals(allow_nan=False, allow_infinity=False)),
    (Types.SQL_DATE(), st.dates()),
    (Types.SQL_TIME(), st.times()),
    (Types.SQL_TIMESTAMP(), st.datetimes()),
    (Types.INSTANT(), st.datetimes(timezones=st.just(dt.UTC))),
    (Types.PICKLED_BYTE_ARRAY(), st.dictionaries(st.text(), st.integers())),
    (Types.LOCAL_DATE_TIME(), st.datetimes()),
    (Types.OBJECT_ARRAY(Types.LONG()), st.lists(st.none() | st.integers(0, 2**60))),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), st.binary()),
    (Types.PRIMITIVE_ARRAY(Types.INT()), st.lists(st.integers(-(2**31), 2**31 - 1))),
    (Types.BASIC_ARRAY(Types.STRING()), st.lists(st.none() | st.text())),
    (Types.LIST(Types.LONG()), st.lists(st.integers(-(2**63), 2**63 - 1))),
    (
        Types.MAP(Types.STRING(), Types.DOUBLE()),
        st.dictionaries(st.text(), st.none() | st.floats(allow_nan=False)),
    ),
    (
        Types.TUPLE([Types.INT(), Types.STRING()]),
        st.tuples(st.none() | st.integers(0, 9), st.text()),
    ),
    (
        Types.ROW([Types.LONG(), Types.BOOLEAN()]),
        st.builds(Row, st.integers(0, 10**12), st.booleans()),
    ),
    (
        Types.ROW_NAMED(["a", "b"], [Types.STRING(), Types.LIST(Types.INT())]),
        st.builds(lambda a, b: Row(a=a, b=b), st.text(), st.lists(st.integers(0, 99))),
    ),
]


@pytest.mark.parametrize(("type_info", "strategy"), CASES, ids=lambda c: repr(c)[:40])
def test_round_trip(type_info, strategy) -> None:
    ser = type_info.get_serializer()
    rebuilt = serializer_from_config(ser.snapshot_config())
    assert rebuilt == ser

    @settings(max_examples=60, deadline=None)
    @given(strategy)
    def check(value) -> None:
        data = ser.serialize(value)
        back = rebuilt.deserialize(data)
        if isinstance(value, Decimal):
            assert back == value and str(back) == str(value)
        else:
            assert back == value
        # composed fast path: write twice, read twice
        out = bytearray()
        ser.write(value, out)
        ser.write(value, out)
        first, pos = ser.read(out, 0)
        second, end = ser.read(out, pos)
        assert end == len(out) and first == second == back

    check()
    assert isinstance(type_info.to_arrow_type(), pa.DataType)


def test_named_row_keeps_names() -> None:
    ser = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()]).get_serializer()
    back = ser.deserialize(ser.serialize(Row(id=3, name="x")))
    assert back.as_dict() == {"id": 3, "name": "x"} and back.name == "x"


def test_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="does not fit type INT"):
        Types.INT().get_serializer().serialize(2**31)
    with pytest.raises(ValueError, match="expected 2 bytes, got 3"):
        Types.STRING().get_serializer().deserialize(b"\x01ab")
    with pytest.raises(ValueError, match="trailing bytes"):
        Types.LIST(Types.INT()).get_serializer().deserialize(b"\x00\x00")
    with pytest.raises(ValueError, match="Unknown serializer"):
        serializer_from_config("NOPE")
    with pytest.raises(ValueError, match="CHAR needs a single BMP"):
        Types.CHAR().get_serializer().serialize("ab")


def test_arrow_types() -> None:
    assert Types.LONG().to_arrow_type() == pa.int64()
    assert Types.ROW_NAMED(["a"], [Types.STRING()]).to_arrow_type() == pa.struct(
        [pa.field("a", pa.string())]
    )
    assert Types.MAP(Types.STRING(), Types.INT()).to_arrow_type() == pa.map_(
        pa.string(), pa.int32()
    )
    assert Types.PICKLED_BYTE_ARRAY().to_arrow_type() == pa.binary()


def test_pickle_serializer_any_object() -> None:
    ser = PickleSerializer()
    assert ser.deserialize(ser.serialize({"a": {1, 2}})) == {"a": {1, 2}}


def test_row_semantics() -> None:
    r = Row(name="a", age=3)
    assert r.name == "a" and r[1] == 3 and r["age"] == 3
    assert r == Row(name="a", age=3) and r != Row("a", 3)
    assert repr(r) == "Row(name='a', age=3)"
    r.set_row_kind(RowKind.DELETE)
    back = pickle.loads(pickle.dumps(r))
    assert back == r and back.get_row_kind() is RowKind.DELETE
    assert RowKind.UPDATE_BEFORE.short_string() == "-U"
    person = Row("name", "age")
    assert person("x", 4).as_dict() == {"name": "x", "age": 4}
    with pytest.raises(AttributeError):
        _ = r.missing


def test_used_type_information_still_pickles() -> None:
    """Descriptors are shipped to Spark's workers after a state processor (or a test) used
    their serializers: every serializer pickles."""
    info = Types.ROW_NAMED(["a", "b"], [Types.LONG(), Types.MAP(Types.STRING(), Types.DOUBLE())])
    ser = info.get_serializer()
    back = pickle.loads(pickle.dumps(info)).get_serializer()
    value = Row(a=1, b={"x": 0.5})
    assert back.serialize(value) == ser.serialize(value)
