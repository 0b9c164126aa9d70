"""Flink's type serializer snapshots as they sit in a snapshot's meta info, and decoders of
the bytes of the serializers PyFlink's state uses.

A serializer snapshot is written as its class name, its version and its own body
(``TypeSerializerSnapshot.writeVersionedSnapshot``); composite serializers (list, map, row,
timers) add an outer snapshot and the nested snapshots (``CompositeTypeSerializerSnapshot``,
``NestedSerializersSnapshotDelegate``). A body has no length: a snapshot class this module
does not know cannot be skipped, so it is refused by name. So are Kryo and POJO serializers:
their bytes are Java objects that only the Java classes can read.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.state.table import TtlValue
from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError

__all__ = ["SerializerSnapshot", "read_serializer_snapshot", "value_decoder"]

SNAPSHOT_PROXY_VERSION = 2  # TypeSerializerSnapshotSerializationProxy
OUTER_MAGIC = 911108  # CompositeTypeSerializerSnapshot
NESTED_MAGIC = 1333245  # NestedSerializersSnapshotDelegate

_PKG = "org.apache.flink.api.common.typeutils.base."
_WINDOWS = "org.apache.flink.streaming.api.windowing.windows."
# Simple snapshots: no body. Value: (short name, fixed length or -1).
SIMPLE: dict[str, tuple[str, int]] = {
    _PKG + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot": (
        "bytes",
        -1,
    ),
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot": (
        "void",
        1,
    ),
    _PKG + "LongSerializer$LongSerializerSnapshot": ("long", 8),
    _PKG + "IntSerializer$IntSerializerSnapshot": ("int", 4),
    _PKG + "StringSerializer$StringSerializerSnapshot": ("string", -1),
    _PKG + "BooleanSerializer$BooleanSerializerSnapshot": ("boolean", 1),
    _PKG + "DoubleSerializer$DoubleSerializerSnapshot": ("double", 8),
    _WINDOWS + "TimeWindow$Serializer$TimeWindowSerializerSnapshot": ("time_window", 16),
    # PyFlink's Python windows: the Table runtime's TimeWindow, the same two longs
    "org.apache.flink.table.runtime.operators.window.TimeWindow$Serializer"
    "$TimeWindowSerializerSnapshot": ("time_window", 16),
    # PyFlink's map state keys: a byte array written as an int length and the bytes
    "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
    "$ByteArrayWrapperSerializerSnapshot": ("bytes", -1),
}
# Composite snapshots: short name and the outer snapshot body reader.
COMPOSITE: dict[str, tuple[str, Callable[[DataInput, int], Any]]] = {
    _PKG + "ListSerializerSnapshot": ("list", lambda inp, v: None),
    _PKG + "MapSerializerSnapshot": ("map", lambda inp, v: None),
    "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot": (
        "row",
        lambda inp, v: inp.boolean() if v >= 3 else True,  # legacy mode flag
    ),
    "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot": (
        "timer",
        lambda inp, v: None,
    ),
    # state with a StateTtlConfig: TtlValue(last access timestamp, user value)
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot": (
        "ttl",
        lambda inp, v: None,
    ),
}
REFUSED_HINTS = {
    "Kryo": "a Kryo-serialized type (Java objects Flink serialized with Kryo)",
    "Pojo": "a Java POJO type",
    "Avro": "an Avro type",
}


@dataclass(frozen=True)
class SerializerSnapshot:
    """A serializer as the snapshot records it: its short kind, nested ones, outer flag."""

    class_name: str
    kind: str
    version: int
    nested: tuple[SerializerSnapshot, ...] = ()
    outer: Any = None

    @property
    def fixed_length(self) -> int:
        if self.kind in ("row", "list", "map", "timer", "ttl"):
            return -1
        return SIMPLE[self.class_name][1]

    def describe(self) -> str:
        if not self.nested:
            return self.kind
        return f"{self.kind}<{', '.join(n.describe() for n in self.nested)}>"


def read_serializer_snapshot(inp: DataInput, where: str, proxy: bool = True) -> SerializerSnapshot:
    """One snapshot (with the proxy's version int before it when ``proxy``)."""
    if proxy:
        version = inp.i32()
        if version != SNAPSHOT_PROXY_VERSION:
            raise inp.fail(f"{where}: serializer snapshot proxy version {version}, expected 2")
    return _versioned(inp, where)


def _versioned(inp: DataInput, where: str) -> SerializerSnapshot:
    name = inp.utf()
    version = inp.i32()
    if name in SIMPLE:
        return SerializerSnapshot(name, SIMPLE[name][0], version)
    if name in COMPOSITE:
        kind, outer_reader = COMPOSITE[name]
        outer = None
        if version >= 2 or kind != "row":
            # CompositeTypeSerializerSnapshot: magic, outer version, outer body, nested.
            if inp.i32() != OUTER_MAGIC:
                raise inp.fail(f"{where}: {kind} serializer snapshot without its magic number")
            outer_version = inp.i32()
            outer = outer_reader(inp, outer_version)
        if inp.i32() != NESTED_MAGIC:
            raise inp.fail(f"{where}: nested serializer snapshots without their magic number")
        nested_version = inp.i32()
        if nested_version != 1:
            raise inp.fail(f"{where}: nested serializer snapshots version {nested_version}")
        n = inp.count(f"{where}: nested serializers", 6)
        nested = tuple(_versioned(inp, where) for _ in range(n))
        return SerializerSnapshot(name, kind, version, nested, outer)
    for hint, what in REFUSED_HINTS.items():
        if hint in name:
            raise UnsupportedFlinkStateError(
                f"{inp.what}: {where} is {what} ({name}); only state PyFlink keeps as bytes "
                "or as Flink's basic types can be imported"
            )
    raise UnsupportedFlinkStateError(
        f"{inp.what}: {where} uses the serializer {name} (snapshot version {version}), "
        "which this importer does not know"
    )


# -- decoding serialized values ------------------------------------------------------------


def value_decoder(snap: SerializerSnapshot) -> Callable[[DataInput], Any]:
    """A function reading one value of ``snap``'s type from a ``DataInput``."""
    kind = snap.kind
    if kind == "bytes":
        return lambda inp: inp.sized_bytes("a byte array")
    if kind == "void":
        return lambda inp: inp.byte() and None
    if kind == "long":
        return lambda inp: inp.i64()
    if kind == "int":
        return lambda inp: inp.i32()
    if kind == "boolean":
        return lambda inp: inp.boolean()
    if kind == "double":
        return lambda inp: struct.unpack(">d", inp.take(8))[0]
    if kind == "string":
        return _read_string
    if kind == "time_window":
        return lambda inp: (inp.i64(), inp.i64())
    if kind == "row":
        fields = [value_decoder(n) for n in snap.nested]
        legacy = bool(snap.outer)
        return lambda inp: _read_row(inp, fields, legacy)
    if kind == "timer":
        key, namespace = (value_decoder(n) for n in snap.nested)
        return lambda inp: (_flipped_long(inp), key(inp), namespace(inp))
    if kind == "ttl":
        # CompositeSerializer: the fields one after another, the timestamp first
        timestamp, user = (value_decoder(n) for n in snap.nested)
        return lambda inp: _ttl_value(timestamp(inp), user(inp))
    if kind == "list":
        (elem,) = (value_decoder(n) for n in snap.nested)

        def read_list(inp: DataInput) -> list[Any]:
            return [elem(inp) for _ in range(inp.count("list elements"))]

        return read_list
    raise UnsupportedFlinkStateError(f"{snap.describe()} values cannot be decoded")


def _ttl_value(timestamp: int, value: Any) -> TtlValue:
    return TtlValue(value, timestamp)


def _flipped_long(inp: DataInput) -> int:
    """A timestamp as ``TimerSerializer`` writes it: its sign bit flipped (sorts unsigned)."""
    raw = (inp.i64() & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63)
    return raw - (1 << 64) if raw >= 1 << 63 else raw


def _read_row(inp: DataInput, fields: list[Callable[[DataInput], Any]], legacy: bool) -> tuple:
    """Flink's ``RowSerializer``: a null mask (after the row kind's two bits unless legacy),
    then the non-null fields."""
    offset = 0 if legacy else 2
    n_bits = len(fields) + offset
    mask = bytes(inp.take((n_bits + 7) // 8))
    out = []
    for i, read in enumerate(fields):
        bit = i + offset
        null = mask[bit // 8] & (0x80 >> (bit % 8))
        out.append(None if null else read(inp))
    return tuple(out)


def _read_string(inp: DataInput) -> str | None:
    """Flink's ``StringValue.readString``: length + 1 as a variable-length int (0 is null),
    then the characters, each a variable-length int of its UTF-16 code unit."""

    def varint() -> int:
        value = shift = 0
        while True:
            b = inp.byte()
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 35:
                raise inp.fail("a string length is not a variable-length int")

    n = varint()
    if n == 0:
        return None
    n -= 1
    if n > inp.remaining:
        raise inp.fail(f"a string of {n} characters with {inp.remaining} bytes left")
    units = [varint() for _ in range(n)]
    data = b"".join(u.to_bytes(2, "little") for u in units)
    return data.decode("utf-16-le", "surrogatepass")


def decode_all(read: Callable[[DataInput], Any], data: bytes, what: str) -> Any:
    """``read`` over all of ``data``; trailing bytes are an error."""
    inp = DataInput(data, what)
    value = read(inp)
    if inp.remaining:
        raise FlinkFormatError(f"{what}: {inp.remaining} bytes left after the value")
    return value
