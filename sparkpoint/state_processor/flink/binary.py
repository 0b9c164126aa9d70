"""Java ``DataInput`` reading of Flink's files, every length and offset checked before use.

A Flink savepoint is input from outside: a count or length read from it is checked against
the bytes that remain (and against ``MAX_ITEMS`` for counts) before anything is allocated.
"""

from __future__ import annotations

import struct

from sparkpoint.state_processor.flink.errors import FlinkFormatError

__all__ = ["MAX_ITEMS", "DataInput", "java_utf"]

MAX_ITEMS = 1 << 24
"""The most entries of any count field accepted (operators, subtasks, states, offsets)."""

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_USHORT = struct.Struct(">H")


def java_utf(data: bytes) -> str:
    """Decode Java's modified UTF-8 (``DataOutput.writeUTF``): NUL as ``C0 80``, characters
    outside the BMP as two 3-byte surrogates."""
    text = data.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")


class DataInput:
    """A big-endian reader over ``data[start:end]`` that names ``what`` (the file) and the
    offset in every error."""

    def __init__(self, data: bytes | memoryview, what: str, start: int = 0, end: int | None = None):
        self.data = memoryview(data)
        self.what = what
        self.pos = start
        self.end = len(self.data) if end is None else end
        if not 0 <= start <= self.end <= len(self.data):
            raise FlinkFormatError(f"{what}: range {start}..{end} outside its {len(data)} bytes")

    def fail(self, message: str) -> FlinkFormatError:
        """An error naming the file and the current offset."""
        return FlinkFormatError(f"{self.what}: {message} (at byte {self.pos})")

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> memoryview:
        pos = self.pos
        if n < 0 or n > self.end - pos:
            if n < 0:
                raise self.fail(f"negative length {n}")
            raise self.fail(f"truncated: {n} bytes needed, {self.end - pos} left")
        self.pos = pos + n
        return self.data[pos : pos + n]

    def byte(self) -> int:
        return self.take(1)[0]

    def signed_byte(self) -> int:
        b = self.byte()
        return b - 256 if b > 127 else b

    def boolean(self) -> bool:
        b = self.byte()
        if b not in (0, 1):
            raise self.fail(f"a boolean byte is {b}, not 0 or 1")
        return b == 1

    def i16(self) -> int:
        return int(_SHORT.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_INT.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_LONG.unpack(self.take(8))[0])

    def count(self, what: str, min_bytes_each: int = 1) -> int:
        """An int count of ``what``, checked: not negative, at most ``MAX_ITEMS``, and
        fitting the bytes left at ``min_bytes_each`` bytes an item."""
        n = self.i32()
        if n < 0 or n > MAX_ITEMS or n * min_bytes_each > self.remaining:
            raise self.fail(f"{what}: count {n} is impossible with {self.remaining} bytes left")
        return n

    def utf(self) -> str:
        n = int(_USHORT.unpack(self.take(2))[0])
        raw = bytes(self.take(n))
        try:
            return java_utf(raw)
        except UnicodeDecodeError as e:
            raise self.fail(f"a string is not modified UTF-8: {e}") from e

    def sized_bytes(self, what: str) -> bytes:
        """An int length then that many bytes."""
        n = int(_INT.unpack(self.take(4))[0])
        pos = self.pos
        if n < 0 or n > self.end - pos:
            raise self.fail(f"{what}: length {n} with {self.end - pos} bytes left")
        self.pos = pos + n
        return bytes(self.data[pos : pos + n])
