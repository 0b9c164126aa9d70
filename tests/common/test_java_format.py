"""Java's spelling of typed values, as PyFlink's print sinks show them (pure Python)."""

from __future__ import annotations

import datetime
import decimal
import pathlib
import random
import struct

import pytest

from sparkpoint.common import Row, Types
from sparkpoint.connectors.java_format import (
    hash_map_order,
    java_double_string,
    java_float_string,
    java_hash_code,
    java_string,
)
from sparkpoint.connectors.sink import format_values
from sparkpoint.types import RowKind

MIN_SUBNORMAL = 5e-324
MIN_NORMAL = 2.2250738585072014e-308


@pytest.mark.parametrize(
    "value, expected",
    [
        (1.0, "1.0"),
        (100.0, "100.0"),
        (-1.5, "-1.5"),
        (0.1, "0.1"),
        (0.1 + 0.2, "0.30000000000000004"),
        (12345678.9, "1.23456789E7"),
        (1234567.0, "1234567.0"),
        (123456789.0, "1.23456789E8"),
        # the 10^7 switch to scientific notation
        (9999999.0, "9999999.0"),
        (9999999.999999998, "9999999.999999998"),
        (1e7, "1.0E7"),
        (10000000.000000002, "1.0000000000000002E7"),
        # the 10^-3 switch
        (0.001, "0.001"),
        (0.0010000000000000002, "0.0010000000000000002"),
        (0.000999, "9.99E-4"),
        (0.0009999999999999998, "9.999999999999998E-4"),
        (1e-4, "1.0E-4"),
        (1e-05, "1.0E-5"),
        (1e21, "1.0E21"),
        (1e23, "9.999999999999999E22"),  # Java 17 (Java 19+: 1.0E23)
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (MIN_NORMAL, "2.2250738585072014E-308"),
        # subnormals: at least two digits
        (MIN_SUBNORMAL, "4.9E-324"),
        (2 * MIN_SUBNORMAL, "1.0E-323"),  # Java 17 (Java 19+: 9.9E-324)
        (3 * MIN_SUBNORMAL, "1.5E-323"),
        (4 * MIN_SUBNORMAL, "2.0E-323"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (float("nan"), "NaN"),
    ],
)
def test_double_to_string(value: float, expected: str) -> None:
    assert java_double_string(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (0.1, "0.1"),
        (1 / 3, "0.33333334"),
        (12345678.9, "1.2345679E7"),
        (16777217.0, "1.6777216E7"),
        (110.1, "110.1"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (0.001, "0.001"),
        (0.000999, "9.99E-4"),
        (1e-05, "1.0E-5"),
        (3.4028234663852886e38, "3.4028235E38"),
        (1.401298464324817e-45, "1.4E-45"),
        (2.802596928649634e-45, "2.8E-45"),
        (1.1754943508222875e-38, "1.17549435E-38"),  # Java 17 (Java 19+: 1.1754944E-38)
        # beyond the float range: the cast gives 0 or an infinity, as in Java
        (5e-324, "0.0"),
        (1e-46, "0.0"),
        (-1e-46, "-0.0"),
        (1.79e308, "Infinity"),
        (-1.79e308, "-Infinity"),
        (float("nan"), "NaN"),
        (-0.0, "-0.0"),
    ],
)
def test_float_to_string(value: float, expected: str) -> None:
    assert java_float_string(value) == expected


def _parse_float32(text: str) -> float:
    """The float32 nearest to a decimal string (exact, no double rounding)."""
    d = decimal.Decimal(text)
    f = struct.unpack(">f", struct.pack(">f", float(d)))[0]
    bits = struct.unpack(">i", struct.pack(">f", f))[0]
    neighbours = [struct.unpack(">f", struct.pack(">i", b))[0] for b in (bits - 1, bits + 1)]
    return min([f, *neighbours], key=lambda c: abs(decimal.Decimal(c) - d))


def test_strings_round_trip() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        d = struct.unpack(">d", struct.pack(">Q", rng.getrandbits(63)))[0]
        if d != d or d == float("inf"):
            continue
        assert float(java_double_string(d)) == d
        f = struct.unpack(">f", struct.pack(">I", rng.getrandbits(31)))[0]
        if f != f or f == float("inf"):
            continue
        assert _parse_float32(java_float_string(f)) == f


JAVA17_STRINGS = pathlib.Path(__file__).with_name("java17_float_strings.txt")


def test_strings_match_what_java_17_printed() -> None:
    """1,200 random doubles and floats, printed by Java 17 (the file's first line says which
    build): Java 17 is not always shortest, so every digit is compared."""
    lines = [ln for ln in JAVA17_STRINGS.read_text().splitlines() if not ln.startswith("#")]
    assert len(lines) == 1200
    for line in lines:
        kind, bits, expected = line.split()
        if kind == "d":
            value = struct.unpack(">d", struct.pack(">Q", int(bits, 16)))[0]
            assert java_double_string(value) == expected, line
        else:
            value = struct.unpack(">f", struct.pack(">I", int(bits, 16)))[0]
            assert java_float_string(value) == expected, line


@pytest.mark.parametrize(
    "value, single, expected",
    [
        (2.5e10, True, "2.49999995E10"),  # Java 19+: 2.5E10
        (1.0e23, False, "9.999999999999999E22"),  # Java 19+: 1.0E23
        (2.82879384806159e17, False, "2.82879384806159008E17"),  # Java 19+: ...159E17
        (1.0e10, True, "1.0E10"),
        (9.3860841e27, True, "9.386084E27"),
    ],
)
def test_java_17_is_not_always_shortest(value: float, single: bool, expected: str) -> None:
    assert (java_float_string if single else java_double_string)(value) == expected


def test_hash_codes_match_java() -> None:
    assert java_hash_code("aa", Types.STRING()) == 3104
    assert java_hash_code("", Types.STRING()) == 0
    assert java_hash_code(-1, Types.INT()) == 0xFFFFFFFF
    assert java_hash_code(2**32, Types.LONG()) == 1
    assert java_hash_code(True, Types.BOOLEAN()) == 1231
    assert java_hash_code(1.0, Types.DOUBLE()) == 1072693248
    assert java_hash_code(1.0, Types.FLOAT()) == 1065353216
    assert java_hash_code("\U0001f600", Types.STRING()) == (0xD83D * 31 + 0xDE00)


def test_hash_map_order_follows_buckets_and_capacity() -> None:
    # new HashMap<>(3): 4 buckets; new HashMap<>(5): 8 buckets (PyFlink's t09 golden)
    assert hash_map_order(["x", "aa", "zz"], Types.STRING()) == ["x", "aa", "zz"]
    assert hash_map_order(["x", "aa", "zz", "B", "key10"], Types.STRING()) == [
        "x",
        "aa",
        "zz",
        "B",
        "key10",
    ]
    # 16 keys need 32 buckets (threshold 0.75): ints then sit in value order
    keys = list(range(15, -1, -1))
    assert hash_map_order(keys, Types.INT()) == list(range(16))
    assert hash_map_order([], Types.INT()) == []


def test_typed_java_strings() -> None:
    inner = Types.TUPLE([Types.INT(), Types.STRING()])
    outer = Types.TUPLE(
        [Types.STRING(), inner, Types.BOOLEAN(), Types.ROW([Types.INT(), Types.DOUBLE()])]
    )
    assert java_string(("b, c", (2, "y"), False, Row(None, 0.5)), outer) == (
        "(b, c,(2,y),false,+I[null, 0.5])"
    )
    row = Row(3, 1e-05)
    row.set_row_kind(RowKind.DELETE)
    assert java_string(row, Types.ROW([Types.INT(), Types.DOUBLE()])) == "-D[3, 1.0E-5]"
    assert (
        java_string({"k2": [3.0, 2.0]}, Types.MAP(Types.STRING(), Types.LIST(Types.DOUBLE())))
        == "{k2=[3.0, 2.0]}"
    )
    assert java_string([1, None], Types.LIST(Types.LONG())) == "[1, null]"
    assert java_string(datetime.time(13, 5, 7, 250000), Types.SQL_TIME()) == "13:05:07"
    ts = datetime.datetime(2024, 1, 2, 3, 4, 5)
    assert java_string(ts, Types.SQL_TIMESTAMP()) == "2024-01-02 03:04:05.0"
    assert java_string(ts.replace(microsecond=123000), Types.SQL_TIMESTAMP()) == (
        "2024-01-02 03:04:05.123"
    )
    assert java_string(ts.replace(microsecond=5), Types.SQL_TIMESTAMP()) == (
        "2024-01-02 03:04:05.000005"
    )
    assert java_string(decimal.Decimal("-0.000001"), Types.BIG_DEC()) == "-0.000001"
    assert java_string(datetime.date(1914, 8, 25), Types.SQL_DATE()) == "1914-08-25"
    assert java_string(None, Types.INT()) == "null"
    assert java_string(("a", 1e-05, True, None)) == "(a,1.0E-5,true,null)"  # untyped


def test_print_formats_by_declared_type() -> None:
    values = [12345678.9, 1e-05, float("inf")]
    assert format_values(values) == ["12345678.9", "1e-05", "inf"]
    assert format_values(values, Types.PICKLED_BYTE_ARRAY()) == ["12345678.9", "1e-05", "inf"]
    assert format_values(values, Types.DOUBLE()) == ["1.23456789E7", "1.0E-5", "Infinity"]
    assert format_values(values, Types.FLOAT()) == ["1.2345679E7", "1.0E-5", "Infinity"]
    # a typed Row is formatted in Python (before it reaches Java): no rounding, Python's str
    row_type = Types.ROW([Types.FLOAT(), Types.STRING()])
    assert format_values([Row(12345678.9, None), (0.5, "x")], row_type) == [
        "+I[12345678.9,None]",
        "+I[0.5,x]",
    ]
    assert format_values(["s", "t"], Types.STRING()) == ["s", "t"]
    assert format_values([True], Types.BOOLEAN()) == ["true"]
    with pytest.raises(OverflowError, match="int8_t"):
        format_values([128], Types.BYTE())
