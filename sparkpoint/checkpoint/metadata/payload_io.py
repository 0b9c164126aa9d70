"""Big-endian primitives of ``_metadata`` payloads: integers, and bytes and UTF-8 strings
with a u32 length. The reader names the field, the absolute byte offset and the file in
the ``MetadataFormatError`` of any short or malformed read."""

from __future__ import annotations

import struct

from sparkpoint.checkpoint.metadata.serializer import metadata_format_error
from sparkpoint.errors import MetadataFormatError

__all__ = ["PayloadReader", "PayloadWriter"]


class PayloadWriter:
    """Appends big-endian primitives to a buffer."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def u8(self, v: int) -> None:
        """Append an unsigned byte."""
        self.buf += struct.pack(">B", v)

    def i32(self, v: int) -> None:
        """Append a signed 32-bit integer."""
        self.buf += struct.pack(">i", v)

    def u32(self, v: int) -> None:
        """Append an unsigned 32-bit integer."""
        self.buf += struct.pack(">I", v)

    def i64(self, v: int) -> None:
        """Append a signed 64-bit integer."""
        self.buf += struct.pack(">q", v)

    def raw(self, data: bytes) -> None:
        """Append ``data`` after its u32 length."""
        self.u32(len(data))
        self.buf += data

    def text(self, s: str) -> None:
        """Append ``s`` as UTF-8 after its u32 length."""
        self.raw(s.encode("utf-8"))


class PayloadReader:
    """Reads big-endian primitives; errors name the absolute byte offset in the file."""

    def __init__(self, data: bytes, base_offset: int, source: str | None) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.base = base_offset
        self.source = source

    @property
    def offset(self) -> int:
        """The absolute byte offset in the file of the next read."""
        return self.base + self.pos

    def fail(self, detail: str, at: int | None = None) -> MetadataFormatError:
        """A ``malformed payload`` error at ``at`` (default: the current offset)."""
        return metadata_format_error(
            "malformed payload", detail, self.offset if at is None else at, self.source
        )

    def _take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"{what} needs {n} bytes, only {len(self.data) - self.pos} remain")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u8(self, what: str) -> int:
        """Read an unsigned byte (``what`` names the field in errors)."""
        return int(self._take(1, what)[0])

    def i32(self, what: str) -> int:
        """Read a signed 32-bit integer."""
        return int(struct.unpack(">i", self._take(4, what))[0])

    def u32(self, what: str) -> int:
        """Read an unsigned 32-bit integer."""
        return int(struct.unpack(">I", self._take(4, what))[0])

    def i64(self, what: str) -> int:
        """Read a signed 64-bit integer."""
        return int(struct.unpack(">q", self._take(8, what))[0])

    def raw(self, what: str) -> bytes:
        """Read bytes written after their u32 length."""
        n = self.u32(f"length of {what}")
        return bytes(self._take(n, what))

    def text(self, what: str) -> str:
        """Read a UTF-8 string written after its u32 length."""
        at = self.offset
        data = self.raw(what)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8", at) from None

    def count(self, what: str) -> int:
        """Read a u32 element count, refused when it exceeds the bytes left."""
        n = self.u32(what)
        if n > len(self.data) - self.pos:
            raise self.fail(f"{what} {n} exceeds the bytes left in the payload")
        return n
