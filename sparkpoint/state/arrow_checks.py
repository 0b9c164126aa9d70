"""Arrow IPC messages read from a snapshot, checked before and after decoding.

pyarrow decodes a record batch by trusting its message: buffers are sliced where the
message says, compressed buffers are allocated at the size they declare, and offsets are
not checked until something validates them (a crafted offset of -4096 hands process memory
to the decoder). So, before decoding, the message's flatbuffer is read here (no pyarrow
involved): it must be a record batch without compression whose buffers all lie inside its
body and whose row count the body can hold; after decoding, the batch is validated in full
(``RecordBatch.validate(full=True)``: offsets, lengths, UTF-8). Snapshots never write
compressed or dictionary-encoded Arrow, so both are refused.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pyarrow as pa

__all__ = ["ArrowBlockError", "read_checked_batch", "read_checked_stream"]

_RECORD_BATCH = 3
_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_PAIR = struct.Struct("<qq")


class ArrowBlockError(ValueError):
    """An Arrow message a snapshot may not hold; the caller names the file."""


class _Table:
    """One flatbuffer table: its fields by index, bounds-checked."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        vtable = pos - _I32.unpack_from(buf, pos)[0]
        if not 0 <= vtable <= len(buf) - 4:
            raise ArrowBlockError("its message's vtable lies outside the message")
        self.vtable = vtable
        self.vsize = _U16.unpack_from(buf, vtable)[0]

    def field(self, index: int) -> int | None:
        """The position of field ``index``'s value, or None when absent."""
        at = 4 + 2 * index
        if at + 2 > self.vsize:
            return None
        off = _U16.unpack_from(self.buf, self.vtable + at)[0]
        return None if off == 0 else self.pos + off

    def table(self, index: int) -> _Table | None:
        at = self.field(index)
        return None if at is None else _Table(self.buf, at + _U32.unpack_from(self.buf, at)[0])

    def pairs(self, index: int) -> list[tuple[int, int]]:
        """A vector of 16-byte structs of two int64 (FieldNode, Buffer)."""
        at = self.field(index)
        if at is None:
            return []
        vec = at + _U32.unpack_from(self.buf, at)[0]
        n = _U32.unpack_from(self.buf, vec)[0]
        if vec + 4 + 16 * n > len(self.buf):
            raise ArrowBlockError(f"its message declares {n} entries past its end")
        return [_PAIR.unpack_from(self.buf, vec + 4 + 16 * i) for i in range(n)]


def _check_message(message: pa.ipc.Message) -> None:
    """Refuse a message that is not a plain record batch inside its body."""
    meta = message.metadata.to_pybytes()
    body = 0 if message.body is None else message.body.size
    try:
        root = _Table(meta, _U32.unpack_from(meta, 0)[0])
        kind_at = root.field(1)
        kind = 0 if kind_at is None else _U8.unpack_from(meta, kind_at)[0]
        if kind != _RECORD_BATCH:
            raise ArrowBlockError(f"a message of type {kind}, not a record batch")
        batch = root.table(2)
        if batch is None:
            raise ArrowBlockError("a record batch message without its header")
        length_at = batch.field(0)
        length = 0 if length_at is None else _I64.unpack_from(meta, length_at)[0]
        if batch.field(3) is not None:
            raise ArrowBlockError("compressed buffers (snapshots never compress Arrow blocks)")
        buffers = batch.pairs(2)
        nodes = batch.pairs(1)
    except struct.error:
        raise ArrowBlockError("a truncated message header") from None
    if not 0 <= length <= body:
        raise ArrowBlockError(f"{length} rows declared for a {body}-byte body")
    for n, nulls in nodes:
        if not (0 <= n <= length and 0 <= nulls <= n):
            raise ArrowBlockError(f"a column of {n} values ({nulls} null) in {length} rows")
    for offset, size in buffers:
        if offset < 0 or size < 0 or offset + size > body:
            raise ArrowBlockError(
                f"a buffer of {size} bytes at {offset}, outside the {body}-byte body"
            )


def _validated(batch: pa.RecordBatch) -> pa.RecordBatch:
    try:
        batch.validate(full=True)
    except pa.ArrowException as exc:
        raise ArrowBlockError(str(exc)) from None
    return batch


def read_checked_batch(block: bytes | memoryview, schema: pa.Schema) -> pa.RecordBatch:
    """The record batch of one IPC message (``RecordBatch.serialize()``), checked as the
    module says; ``ArrowBlockError`` otherwise."""
    try:
        message = pa.ipc.read_message(pa.py_buffer(block))
        _check_message(message)
        return _validated(pa.ipc.read_record_batch(message, schema))
    except (pa.ArrowException, OSError, EOFError, StopIteration) as exc:
        raise ArrowBlockError(str(exc) or "the stream ends early") from None


def read_checked_stream(payload: bytes | memoryview, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The record batches of an IPC stream whose schema must equal ``schema``, each
    checked as the module says; ``ArrowBlockError`` otherwise."""
    try:
        reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(payload))
        found = pa.ipc.read_schema(reader.read_next_message())
        if not found.equals(schema):
            raise ArrowBlockError(f"schema {found} where {schema} is expected")
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                return
            _check_message(message)
            yield _validated(pa.ipc.read_record_batch(message, schema))
    except (pa.ArrowException, OSError, EOFError, StopIteration) as exc:
        raise ArrowBlockError(str(exc) or "the stream ends early") from None
