"""Column codecs give exactly the per-value serializer bytes, and decode them back."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.common.typeinfo import Types
from sparkpoint.state.column_codecs import decode_column, encode_column

CASES = [
    (Types.LONG(), st.integers(-(2**63), 2**63 - 1)),
    (Types.INT(), st.integers(-(2**31), 2**31 - 1)),
    (Types.SHORT(), st.integers(-(2**15), 2**15 - 1)),
    (Types.BYTE(), st.integers(-128, 127)),
    (Types.DOUBLE(), st.floats(allow_nan=False)),
    (Types.FLOAT(), st.floats(width=32, allow_nan=False)),
    (Types.BOOLEAN(), st.booleans()),
    (Types.STRING(), st.text(max_size=300)),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), st.binary(max_size=20000)),
    (Types.PICKLED_BYTE_ARRAY(), st.tuples(st.integers(), st.text(max_size=5))),
    (Types.LIST(Types.INT()), st.lists(st.integers(0, 9), max_size=3)),
]


@pytest.mark.parametrize(("type_info", "strategy"), CASES, ids=lambda c: repr(c)[:30])
def test_column_equals_per_value(type_info, strategy) -> None:
    ser = type_info.get_serializer()

    @settings(max_examples=40, deadline=None)
    @given(st.lists(strategy, max_size=60), st.integers(0, 5))
    def check(values, cut) -> None:
        column = encode_column(ser, values)
        assert column.to_pylist() == [ser.serialize(v) for v in values]
        assert decode_column(ser, column) == [ser.deserialize(ser.serialize(v)) for v in values]
        sliced = column.slice(min(cut, len(values)))
        assert decode_column(ser, sliced) == decode_column(ser, column)[min(cut, len(values)) :]

    check()


def test_out_of_range_falls_back_to_the_clear_error() -> None:
    with pytest.raises(ValueError, match="does not fit type INT"):
        encode_column(Types.INT().get_serializer(), [1, 2**31])


def test_corrupt_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="8 bytes each"):
        decode_column(Types.LONG().get_serializer(), pa.array([b"\x00" * 7], pa.binary()))
    with pytest.raises(ValueError, match="length prefixes do not match"):
        decode_column(Types.STRING().get_serializer(), pa.array([b"\x05ab"], pa.binary()))
    with pytest.raises(ValueError, match="without its length prefix"):
        decode_column(Types.STRING().get_serializer(), pa.array([b""], pa.binary()))
