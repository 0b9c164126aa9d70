"""Type serializers: compact typed byte encodings for state, pickle only for untyped state.

Every serializer has ``serialize``/``deserialize`` for whole values and a fast path
``write(value, out)`` (append to a ``bytearray``) / ``read(buf, pos) -> (value, pos)`` used to
compose rows, lists and maps without intermediate copies. ``snapshot_config()`` is a JSON
value from which ``serializer_from_config`` rebuilds an equal serializer (recorded in
snapshot and savepoint headers so state can be read back without the job's code).

Encodings (all integers big-endian, as Flink's ``DataOutputView``): BOOLEAN 1 byte; BYTE,
SHORT, INT, LONG 1/2/4/8 bytes two's complement; FLOAT/DOUBLE IEEE 754; CHAR one UTF-16
unit; STRING varint(len) + UTF-8; BIG_INT varint(len) + two's complement bytes; BIG_DEC as
STRING of ``str(Decimal)``; SQL_DATE int32 days since 1970-01-01; SQL_TIME int64 microseconds
of the day; SQL_TIMESTAMP int64 microseconds since the epoch (naive); INSTANT int64 seconds
+ int32 nanoseconds (UTC); bytes varint(len) + raw; arrays/lists varint(n) + per element a
null flag byte (0 = null, 1 = value) + value; maps varint(n) + key + null flag + value; rows
and tuples a null bitmap of ceil(n/8) bytes (bit i set = field i null) + the fields; pickle
varint(len) + ``pickle.dumps(v, protocol=5)``. Varints are unsigned LEB128.
"""

from __future__ import annotations

import abc
import datetime as dt
import pickle
import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from sparkpoint.state import pickling
from sparkpoint.types import Row

__all__ = [
    "BigDecSerializer",
    "BigIntSerializer",
    "BytesSerializer",
    "CharSerializer",
    "DateSerializer",
    "FixedSerializer",
    "InstantSerializer",
    "ListSerializer",
    "MapSerializer",
    "PickleSerializer",
    "RowSerializer",
    "StringSerializer",
    "TimeSerializer",
    "TimestampSerializer",
    "TupleSerializer",
    "TypeSerializer",
    "read_varint",
    "serializer_from_config",
    "write_varint",
]

Buffer = bytes | bytearray | memoryview


def write_varint(n: int, out: bytearray) -> None:
    """Append ``n`` (>= 0) as an unsigned LEB128 varint."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read an unsigned LEB128 varint at ``pos``; returns ``(value, new_pos)``."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


_PREFIXES: dict[int, bytes] = {}
_PREFIX_CACHE_LIMIT = 1 << 16


def _length_prefix(n: int) -> bytes:
    """The varint of ``n`` as bytes (cached for the lengths met most)."""
    prefix = _PREFIXES.get(n)
    if prefix is None:
        out = bytearray()
        write_varint(n, out)
        prefix = bytes(out)
        if n < _PREFIX_CACHE_LIMIT:
            _PREFIXES[n] = prefix
    return prefix


class TypeSerializer(abc.ABC):
    """Turns values of one type into bytes and back."""

    @abc.abstractmethod
    def write(self, value: Any, out: bytearray) -> None:
        """Append the encoding of ``value`` to ``out``."""

    @abc.abstractmethod
    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        """Decode one value at ``pos``; returns ``(value, position after it)``."""

    @abc.abstractmethod
    def snapshot_config(self) -> Any:
        """A JSON value describing this serializer (see ``serializer_from_config``)."""

    def serialize(self, value: Any) -> bytes:
        """The encoding of ``value``."""
        out = bytearray()
        self.write(value, out)
        return bytes(out)

    def deserialize(self, data: Buffer) -> Any:
        """The value encoded in ``data`` (which must hold exactly one value)."""
        value, pos = self.read(data, 0)
        if pos > len(data):
            raise ValueError(
                f"{type(self).__name__}: the value needs {pos} bytes, only {len(data)} are there"
            )
        if pos != len(data):
            raise ValueError(
                f"{type(self).__name__}: {len(data) - pos} trailing bytes after the value"
            )
        return value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeSerializer) and (
            self.snapshot_config() == other.snapshot_config()
        )

    def __hash__(self) -> int:
        return hash(repr(self.snapshot_config()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.snapshot_config()!r})"


class FixedSerializer(TypeSerializer):
    """A fixed-width primitive packed with ``struct`` (BOOLEAN, BYTE, ... DOUBLE)."""

    _FORMATS = {
        "BOOLEAN": ">?",
        "BYTE": ">b",
        "SHORT": ">h",
        "INT": ">i",
        "LONG": ">q",
        "FLOAT": ">f",
        "DOUBLE": ">d",
    }

    def __init__(self, type_name: str) -> None:
        if type_name not in self._FORMATS:
            raise ValueError(f"No fixed-width serializer for type {type_name!r}")
        self.type_name = type_name
        self._struct = struct.Struct(self._FORMATS[type_name])
        self._size = self._struct.size
        self._cast = (
            bool if type_name == "BOOLEAN" else (float if type_name in ("FLOAT", "DOUBLE") else int)
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by type name (a ``struct.Struct`` does not pickle), so that type
        information and descriptors still ship to Spark's workers once used."""
        return FixedSerializer, (self.type_name,)

    def write(self, value: Any, out: bytearray) -> None:
        try:
            out += self._struct.pack(self._cast(value))
        except struct.error as e:
            raise ValueError(f"Value {value!r} does not fit type {self.type_name}: {e}") from e

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        return self._struct.unpack_from(buf, pos)[0], pos + self._size

    def serialize(self, value: Any) -> bytes:
        try:
            return self._struct.pack(self._cast(value))
        except struct.error as e:
            raise ValueError(f"Value {value!r} does not fit type {self.type_name}: {e}") from e

    def deserialize(self, data: Buffer) -> Any:
        if len(data) != self._size:
            raise ValueError(f"{self.type_name} needs {self._size} bytes, got {len(data)}")
        return self._struct.unpack(data)[0]

    def snapshot_config(self) -> Any:
        return self.type_name


class StringSerializer(TypeSerializer):
    """UTF-8 text with a varint length."""

    def write(self, value: Any, out: bytearray) -> None:
        data = value.encode("utf-8")
        write_varint(len(data), out)
        out += data

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        n, pos = read_varint(buf, pos)
        end = pos + n
        return bytes(buf[pos:end]).decode("utf-8"), end

    def serialize(self, value: Any) -> bytes:
        data = value.encode("utf-8")
        return _length_prefix(len(data)) + data

    def deserialize(self, data: Buffer) -> Any:
        n, pos = read_varint(data, 0)
        if pos + n != len(data):
            raise ValueError(f"StringSerializer: expected {pos + n} bytes, got {len(data)}")
        return bytes(data[pos:]).decode("utf-8")

    def snapshot_config(self) -> Any:
        return "STRING"


class BytesSerializer(TypeSerializer):
    """Raw bytes with a varint length (PRIMITIVE_ARRAY(BYTE))."""

    def write(self, value: Any, out: bytearray) -> None:
        write_varint(len(value), out)
        out += value

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        n, pos = read_varint(buf, pos)
        end = pos + n
        return bytes(buf[pos:end]), end

    def serialize(self, value: Any) -> bytes:
        return _length_prefix(len(value)) + value  # type: ignore[no-any-return]

    def deserialize(self, data: Buffer) -> Any:
        n, pos = read_varint(data, 0)
        if pos + n != len(data):
            raise ValueError(f"BytesSerializer: expected {pos + n} bytes, got {len(data)}")
        return bytes(data[pos:])

    def snapshot_config(self) -> Any:
        return "BYTES"


class CharSerializer(TypeSerializer):
    """One character as a single UTF-16 code unit (Java ``char``)."""

    def write(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, str) or len(value) != 1 or ord(value) > 0xFFFF:
            raise ValueError(f"CHAR needs a single BMP character, got {value!r}")
        out += ord(value).to_bytes(2, "big")

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        return chr(int.from_bytes(buf[pos : pos + 2], "big")), pos + 2

    def snapshot_config(self) -> Any:
        return "CHAR"


class BigIntSerializer(TypeSerializer):
    """Arbitrary-size integers: varint(len) + two's complement big-endian bytes."""

    def write(self, value: Any, out: bytearray) -> None:
        v = int(value)
        data = v.to_bytes((v + (v < 0)).bit_length() // 8 + 1, "big", signed=True)
        write_varint(len(data), out)
        out += data

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        n, pos = read_varint(buf, pos)
        return int.from_bytes(buf[pos : pos + n], "big", signed=True), pos + n

    def snapshot_config(self) -> Any:
        return "BIG_INT"


class BigDecSerializer(TypeSerializer):
    """``decimal.Decimal`` written exactly as its string form."""

    _str = StringSerializer()

    def write(self, value: Any, out: bytearray) -> None:
        self._str.write(str(Decimal(value)), out)

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        s, pos = self._str.read(buf, pos)
        return Decimal(s), pos

    def snapshot_config(self) -> Any:
        return "BIG_DEC"


_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class DateSerializer(TypeSerializer):
    """``datetime.date`` as int32 days since 1970-01-01."""

    def write(self, value: Any, out: bytearray) -> None:
        out += _I32.pack((value - _EPOCH_DATE).days)

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        return _EPOCH_DATE + dt.timedelta(days=_I32.unpack_from(buf, pos)[0]), pos + 4

    def snapshot_config(self) -> Any:
        return "SQL_DATE"


class TimeSerializer(TypeSerializer):
    """``datetime.time`` as int64 microseconds of the day."""

    def write(self, value: Any, out: bytearray) -> None:
        us = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000
        out += _I64.pack(us + value.microsecond)

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        us = _I64.unpack_from(buf, pos)[0]
        secs, micro = divmod(us, 1_000_000)
        return dt.time(secs // 3600, secs // 60 % 60, secs % 60, micro), pos + 8

    def snapshot_config(self) -> Any:
        return "SQL_TIME"


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class TimestampSerializer(TypeSerializer):
    """Naive ``datetime.datetime`` as int64 microseconds since 1970-01-01T00:00."""

    def write(self, value: Any, out: bytearray) -> None:
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        out += _I64.pack(_micros(value - _EPOCH_NAIVE))

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        us = _I64.unpack_from(buf, pos)[0]
        return _EPOCH_NAIVE + dt.timedelta(microseconds=us), pos + 8

    def snapshot_config(self) -> Any:
        return "SQL_TIMESTAMP"


class InstantSerializer(TypeSerializer):
    """UTC ``datetime.datetime`` as int64 epoch seconds + int32 nanoseconds (Flink's Instant)."""

    def write(self, value: Any, out: bytearray) -> None:
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        secs, micro = divmod(_micros(value - _EPOCH_UTC), 1_000_000)
        out += _I64.pack(secs)
        out += _I32.pack(micro * 1000)

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        secs = _I64.unpack_from(buf, pos)[0]
        nanos = _I32.unpack_from(buf, pos + 8)[0]
        value = _EPOCH_UTC + dt.timedelta(seconds=secs, microseconds=nanos // 1000)
        return value, pos + 12

    def snapshot_config(self) -> Any:
        return "INSTANT"


class PickleSerializer(TypeSerializer):
    """Any picklable value, varint-length-prefixed (untyped state only). Reads go through
    ``pickling.loads_value`` (``sparkpoint.snapshot.allow-pickle``).

    ``serialize(v)`` equals what ``write`` appends, as for every serializer, so the bytes are
    the same whether a value stands alone or inside a list, map or row.
    """

    def write(self, value: Any, out: bytearray) -> None:
        data = pickle.dumps(value, protocol=5)
        write_varint(len(data), out)
        out += data

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        n, pos = read_varint(buf, pos)
        end = pos + n
        return pickling.loads_value(buf[pos:end]), end

    def serialize(self, value: Any) -> bytes:
        data = pickle.dumps(value, protocol=5)
        return _length_prefix(len(data)) + data

    def deserialize(self, data: Buffer) -> Any:
        n = data[0]
        if n < 0x80 and len(data) == n + 1:  # one-byte length: the common case
            return pickling.loads_value(data[1:])
        return super().deserialize(data)

    def snapshot_config(self) -> Any:
        return "PICKLED_BYTE_ARRAY"


class ListSerializer(TypeSerializer):
    """A list: varint count, then per element a null flag and the element."""

    def __init__(self, element: TypeSerializer, kind: str = "LIST") -> None:
        self.element = element
        self.kind = kind

    def write(self, value: Any, out: bytearray) -> None:
        write_varint(len(value), out)
        ew = self.element.write
        for v in value:
            if v is None:
                out.append(0)
            else:
                out.append(1)
                ew(v, out)

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        n, pos = read_varint(buf, pos)
        er = self.element.read
        result: list[Any] = []
        for _ in range(n):
            flag = buf[pos]
            pos += 1
            if flag:
                v, pos = er(buf, pos)
                result.append(v)
            else:
                result.append(None)
        return result, pos

    def snapshot_config(self) -> Any:
        return {"type": self.kind, "element": self.element.snapshot_config()}


class MapSerializer(TypeSerializer):
    """A dict: varint count, then per entry key, null flag, value."""

    def __init__(self, key: TypeSerializer, value: TypeSerializer) -> None:
        self.key = key
        self.value = value

    def write(self, value: Any, out: bytearray) -> None:
        write_varint(len(value), out)
        for k, v in value.items():
            self.key.write(k, out)
            if v is None:
                out.append(0)
            else:
                out.append(1)
                self.value.write(v, out)

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        n, pos = read_varint(buf, pos)
        result: dict[Any, Any] = {}
        for _ in range(n):
            k, pos = self.key.read(buf, pos)
            flag = buf[pos]
            pos += 1
            if flag:
                result[k], pos = self.value.read(buf, pos)
            else:
                result[k] = None
        return result, pos

    def snapshot_config(self) -> Any:
        return {
            "type": "MAP",
            "key": self.key.snapshot_config(),
            "value": self.value.snapshot_config(),
        }


class TupleSerializer(TypeSerializer):
    """A fixed-arity tuple: null bitmap, then the non-null fields in order."""

    def __init__(self, fields: Sequence[TypeSerializer]) -> None:
        self.fields = tuple(fields)
        self._mask_len = (len(self.fields) + 7) // 8

    def write(self, value: Any, out: bytearray) -> None:
        if len(value) != len(self.fields):
            raise ValueError(f"Expected {len(self.fields)} fields, got {len(value)}: {value!r}")
        mask = 0
        for i, v in enumerate(value):
            if v is None:
                mask |= 1 << i
        out += mask.to_bytes(self._mask_len, "little")
        for ser, v in zip(self.fields, value):
            if v is not None:
                ser.write(v, out)

    def _read_values(self, buf: Buffer, pos: int) -> tuple[list[Any], int]:
        mask = int.from_bytes(buf[pos : pos + self._mask_len], "little")
        pos += self._mask_len
        values: list[Any] = []
        for i, ser in enumerate(self.fields):
            if mask >> i & 1:
                values.append(None)
            else:
                v, pos = ser.read(buf, pos)
                values.append(v)
        return values, pos

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        values, pos = self._read_values(buf, pos)
        return tuple(values), pos

    def snapshot_config(self) -> Any:
        return {"type": "TUPLE", "fields": [f.snapshot_config() for f in self.fields]}


class RowSerializer(TupleSerializer):
    """A ``Row`` (positional or named): null bitmap then fields, like Flink's RowSerializer."""

    def __init__(
        self, fields: Sequence[TypeSerializer], names: Sequence[str] | None = None
    ) -> None:
        super().__init__(fields)
        self.names = None if names is None else tuple(names)
        if self.names is not None and len(self.names) != len(self.fields):
            raise ValueError(f"{len(self.names)} names for {len(self.fields)} row fields")

    def read(self, buf: Buffer, pos: int) -> tuple[Any, int]:
        values, pos = self._read_values(buf, pos)
        if self.names is None:
            return Row(*values), pos
        return Row(**dict(zip(self.names, values))), pos

    def snapshot_config(self) -> Any:
        cfg: dict[str, Any] = {"type": "ROW", "fields": [f.snapshot_config() for f in self.fields]}
        if self.names is not None:
            cfg["names"] = list(self.names)
        return cfg


_SIMPLE: dict[str, TypeSerializer] = {
    "STRING": StringSerializer(),
    "BYTES": BytesSerializer(),
    "CHAR": CharSerializer(),
    "BIG_INT": BigIntSerializer(),
    "BIG_DEC": BigDecSerializer(),
    "SQL_DATE": DateSerializer(),
    "SQL_TIME": TimeSerializer(),
    "SQL_TIMESTAMP": TimestampSerializer(),
    "INSTANT": InstantSerializer(),
    "PICKLED_BYTE_ARRAY": PickleSerializer(),
    **{name: FixedSerializer(name) for name in FixedSerializer._FORMATS},
}


def serializer_from_config(config: Any) -> TypeSerializer:
    """Rebuild the serializer described by ``snapshot_config()`` output."""
    if isinstance(config, str):
        try:
            return _SIMPLE[config]
        except KeyError:
            raise ValueError(f"Unknown serializer {config!r}") from None
    if isinstance(config, dict):
        kind = config.get("type")
        if kind in ("LIST", "PRIMITIVE_ARRAY", "BASIC_ARRAY"):
            return ListSerializer(serializer_from_config(config["element"]), kind)
        if kind == "MAP":
            return MapSerializer(
                serializer_from_config(config["key"]), serializer_from_config(config["value"])
            )
        if kind == "TUPLE":
            return TupleSerializer([serializer_from_config(f) for f in config["fields"]])
        if kind == "ROW":
            return RowSerializer(
                [serializer_from_config(f) for f in config["fields"]], config.get("names")
            )
    raise ValueError(f"Unknown serializer config {config!r}")
