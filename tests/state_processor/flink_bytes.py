"""Test-only writers of Flink's byte layouts, for refusals a real savepoint cannot show
(other versions, handle types, serializers). Written from Flink's format description in
sparkpoint/state_processor/flink/metadata.py; the real savepoints under flink_savepoints/
check the reader itself."""

from __future__ import annotations

import struct


def utf(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">H", len(b)) + b


def metadata(version: int, operators: list[bytes], checkpoint_id: int = 7) -> bytes:
    out = struct.pack(">iiqi", 0x4960672D, version, checkpoint_id, 0)
    out += struct.pack(">i", len(operators)) + b"".join(operators)
    return out


def operator(
    uid: str | None,
    subtasks: list[bytes],
    name: str = "op",
    op_id: bytes = b"\x01" * 16,
    parallelism: int = 1,
    max_parallelism: int = 128,
) -> bytes:
    out = utf(name) + utf(uid or "") + op_id
    out += struct.pack(">ii", parallelism, max_parallelism) + b"\x00"  # no coordinator state
    out += struct.pack(">i", len(subtasks))
    for i, body in enumerate(subtasks):
        out += struct.pack(">i", i) + body
    return out


def subtask(managed_keyed: bytes) -> bytes:
    """No operator state, ``managed_keyed`` as given, no raw keyed or channel state."""
    return struct.pack(">ii", 0, 0) + managed_keyed + b"\x00" + struct.pack(">ii", 0, 0)


def incremental_handle() -> bytes:
    out = b"\x0b" + struct.pack(">q", 3) + utf("0b6b4b0c-0000-0000-0000-000000000000")
    out += struct.pack(">iiq", 0, 128, 100)
    out += b"\x00" + struct.pack(">ii", 0, 0) + utf("handle-id")
    return out


def savepoint_handle(path: str, offsets: list[int], size: int, start: int = 0) -> bytes:
    out = b"\x07" + struct.pack(">ii", start, len(offsets))
    out += b"".join(struct.pack(">q", o) for o in offsets)
    return out + b"\x06" + utf(path) + struct.pack(">q", size)


def simple_snapshot(class_name: str, version: int = 3) -> bytes:
    return utf(class_name) + struct.pack(">i", version)


BYTES = (
    "org.apache.flink.api.common.typeutils.base.array."
    "BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot"
)
VOID = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
ROW = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
LIST = "org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot"


def composite(class_name: str, nested: list[bytes], outer: bytes = b"", version: int = 1) -> bytes:
    out = utf(class_name) + struct.pack(">i", version)
    out += struct.pack(">ii", 911108, 1 if class_name != ROW else 4) + outer
    out += struct.pack(">iii", 1333245, 1, len(nested)) + b"".join(nested)
    return out


def proxied(snapshot: bytes) -> bytes:
    return struct.pack(">i", 2) + snapshot


def row_of_bytes_key() -> bytes:
    return composite(ROW, [simple_snapshot(BYTES)], outer=b"\x01", version=3)


def state_meta(name: str, state_type: str, value_snapshot: bytes) -> bytes:
    out = utf(name) + struct.pack(">i", 0) + struct.pack(">i", 1)
    out += utf("KEYED_STATE_TYPE") + utf(state_type)
    out += struct.pack(">i", 2)
    out += utf("NAMESPACE_SERIALIZER") + proxied(simple_snapshot(VOID))
    out += utf("VALUE_SERIALIZER") + proxied(value_snapshot)
    return out


def keyed_stream(
    metas: list[bytes], entries: list[tuple[int, bytes, bytes]], key_snapshot: bytes | None = None
) -> tuple[bytes, list[int]]:
    """A canonical stream of one key group per entry (entries: key group, key bytes after the
    key-group prefix, value), all of state 0; returns the bytes and key group offsets
    for key groups 0..127."""
    out = bytearray(struct.pack(">i", 6) + b"\x00")
    out += proxied(key_snapshot if key_snapshot is not None else row_of_bytes_key())
    out += struct.pack(">h", len(metas)) + b"".join(metas)
    offsets = [0] * 128
    for kg, key, value in entries:
        offsets[kg] = len(out)
        full = bytearray(bytes([kg]) + key)
        full[0] |= 0x80  # the last (only) entry of the state in this key group
        out += struct.pack(">h", 0)  # the state id; no key group number (it is in the key)
        out += struct.pack(">i", len(full)) + full + struct.pack(">i", len(value)) + value
        out += struct.pack(">H", 0xFFFF)
    return bytes(out), offsets


def pickled_row_key(pickle_bytes: bytes) -> bytes:
    """A PyFlink key: Row(pickled key) (null mask byte, then the byte array), then the
    VoidNamespace byte."""
    return b"\x00" + struct.pack(">i", len(pickle_bytes)) + pickle_bytes + b"\x00"


def list_value(elements: list[bytes]) -> bytes:
    """RocksDB's list format of PyFlink elements (each already coder-encoded)."""
    return b",".join(struct.pack(">i", len(e)) + e for e in elements)
