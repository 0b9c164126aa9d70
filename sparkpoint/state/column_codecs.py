"""Whole-column encoding and decoding with a serializer, vectorised where the type allows.

Snapshots and restores move keys and values as Arrow ``binary`` columns. For fixed-width
numbers and for bytes/strings the canonical encoding of a whole column is computed with
numpy/pyarrow instead of one Python call per value; the bytes are identical to
``serializer.serialize`` of each value (tests compare both paths). Every other type, and
any value the fast path cannot take, goes through the per-value serializer. Pickled values
are each pickled, and their length prefixes made together as for bytes.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkpoint.state.serializers import (
    BytesSerializer,
    FixedSerializer,
    PickleSerializer,
    StringSerializer,
    TypeSerializer,
)

__all__ = ["decode_column", "encode_column"]

_NUMPY = {
    "BYTE": ">i1",
    "SHORT": ">i2",
    "INT": ">i4",
    "LONG": ">i8",
    "DOUBLE": ">f8",
    "FLOAT": ">f4",
    "BOOLEAN": "?",
}
# FLOAT is decode-only: numpy would turn an out-of-range double into inf where struct fails.
_ENCODABLE = frozenset({"BYTE", "SHORT", "INT", "LONG", "DOUBLE", "BOOLEAN"})
_MAX_SHORT_PREFIX = 1 << 14  # lengths with a 1- or 2-byte varint prefix


def _generic_encode(ser: TypeSerializer, values: Sequence[Any]) -> pa.Array:
    serialize = ser.serialize
    return pa.array([serialize(v) for v in values], pa.binary())


def _binary_from(n: int, offsets: np.ndarray, data: np.ndarray | bytes) -> pa.Array:
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


def _offsets(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, data)`` of a binary array as numpy views (slice-aware)."""
    n = len(arr)
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int32)[arr.offset : arr.offset + n + 1]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8)
        if data_buf is not None
        else np.zeros(0, dtype=np.uint8)
    )
    return offsets, data


def encode_column(ser: TypeSerializer, values: Sequence[Any]) -> pa.Array:
    """``binary`` array of ``ser.serialize(v)`` for every value."""
    n = len(values)
    if n == 0:
        return pa.array([], pa.binary())
    if isinstance(ser, FixedSerializer) and ser.type_name in _ENCODABLE:
        try:
            packed = np.asarray(values, dtype=_NUMPY[ser.type_name])
        except (OverflowError, TypeError, ValueError):
            return _generic_encode(ser, values)
        if packed.shape != (n,):
            return _generic_encode(ser, values)
        width = packed.dtype.itemsize
        return _binary_from(n, np.arange(0, (n + 1) * width, width), packed.tobytes())
    if type(ser) is PickleSerializer:  # varint length + pickle (subclasses pickle otherwise)
        return encode_column(BytesSerializer(), [pickle.dumps(v, protocol=5) for v in values])
    if isinstance(ser, BytesSerializer | StringSerializer):
        try:
            raw = (
                pa.array(values, pa.string()).cast(pa.binary())
                if isinstance(ser, StringSerializer)
                else pa.array(values, pa.binary())
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            return _generic_encode(ser, values)
        if raw.null_count:
            return _generic_encode(ser, values)
        offsets, _ = _offsets(raw)
        lens = np.diff(offsets).astype(np.int64)
        if lens.max() >= _MAX_SHORT_PREFIX:
            return _generic_encode(ser, values)
        two = lens >= 128
        plen = 1 + two.astype(np.int64)
        poff = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(plen, out=poff[1:])
        pdata = np.empty(int(poff[-1]), dtype=np.uint8)
        starts = poff[:-1]
        pdata[starts] = np.where(two, (lens & 0x7F) | 0x80, lens).astype(np.uint8)
        pdata[starts[two] + 1] = (lens[two] >> 7).astype(np.uint8)
        prefixes = _binary_from(n, poff, pdata.tobytes())
        return pc.binary_join_element_wise(prefixes, raw, b"")
    return _generic_encode(ser, values)


def _generic_decode(ser: TypeSerializer, arr: pa.Array) -> list[Any]:
    deserialize = ser.deserialize
    return [deserialize(b) for b in arr.to_pylist()]


def decode_column(ser: TypeSerializer, arr: pa.Array) -> list[Any]:
    """The values of a ``binary`` array written by ``encode_column``/``serialize``."""
    n = len(arr)
    if n == 0:
        return []
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        raise ValueError(f"{type(ser).__name__}: {arr.null_count} null values in a column")
    if isinstance(ser, FixedSerializer):
        dtype = np.dtype(_NUMPY[ser.type_name])
        offsets, data = _offsets(arr)
        if not np.all(np.diff(offsets) == dtype.itemsize):
            raise ValueError(f"{ser.type_name} values must be {dtype.itemsize} bytes each")
        values = np.frombuffer(data, dtype=dtype, count=n, offset=int(offsets[0]))
        return values.tolist()  # type: ignore[no-any-return]
    if isinstance(ser, BytesSerializer | StringSerializer):
        offsets, data = _offsets(arr)
        lens = np.diff(offsets).astype(np.int64)
        starts = offsets[:-1].astype(np.int64)
        if lens.min() < 1:
            raise ValueError(f"{type(ser).__name__}: a value without its length prefix")
        b0 = data[starts].astype(np.int64)
        two = b0 >= 0x80
        declared = b0 & 0x7F
        if two.any():
            if lens[two].min() < 2:
                raise ValueError(f"{type(ser).__name__}: a truncated length prefix")
            b1 = data[starts[two] + 1].astype(np.int64)
            if (b1 >= 0x80).any():
                return _generic_decode(ser, arr)  # 3+ byte prefixes: values >= 16 KiB
            declared[two] |= b1 << 7
        if not np.array_equal(declared + 1 + two, lens):
            raise ValueError(f"{type(ser).__name__}: length prefixes do not match the values")
        body = pc.binary_slice(arr, 1, 1 << 30)
        if two.any():
            body = pc.if_else(pa.array(two), pc.binary_slice(arr, 2, 1 << 30), body)
        if isinstance(ser, StringSerializer):
            return body.cast(pa.string()).to_pylist()  # type: ignore[no-any-return]
        return body.to_pylist()  # type: ignore[no-any-return]
    return _generic_decode(ser, arr)
