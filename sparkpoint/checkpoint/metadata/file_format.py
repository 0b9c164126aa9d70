"""The ``_metadata`` binary format: a checksummed frame around a versioned payload.

Frame (all integers big-endian; the frame never changes between versions)::

    offset  size  field
    0       4     magic b"SPKM"
    4       4     u32 format version (selects the payload's serializer, ``serializers``)
    8       8     u64 payload length L
    16      4     u32 CRC32 of bytes 0..15 (the header)
    20      L     payload
    20+L    4     u32 CRC32 of the payload

A reader checks, in order: magic, that the header is complete, the header checksum, that the
version is known, that the file has exactly the declared length, and the payload checksum.
Each failure raises ``MetadataFormatError`` naming the file (when known), the kind of problem
(``bad magic``, ``truncated``, ``checksum mismatch``, ``unknown version N``, ``malformed``)
and the byte offset. Payloads are never pickled.
"""

from __future__ import annotations

import struct
import zlib
from typing import Protocol

from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
)
from sparkpoint.checkpoint.metadata.checkpoint_metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.serializer import metadata_format_error
from sparkpoint.checkpoint.metadata.serializers import CURRENT_VERSION, MetadataSerializers
from sparkpoint.checkpoint.paths import SnapshotPaths
from sparkpoint.checkpoint.storage import (
    CheckpointStorageLocation,
    CompletedCheckpointStorageLocation,
    read_metadata_bytes,
    write_metadata_bytes,
)

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "encode_frame",
    "load_checkpoint",
    "load_checkpoint_metadata",
    "store_checkpoint_metadata",
    "write_metadata",
]

MAGIC = b"SPKM"
HEADER_SIZE = 20
TRAILER_SIZE = 4
_HEADER = struct.Struct(">4sIQ")
_U32 = struct.Struct(">I")


# ---- framing ------------------------------------------------------------------------------


def encode_frame(version: int, payload: bytes) -> bytes:
    """The complete file: header with checksum, ``payload``, payload checksum."""
    head = _HEADER.pack(MAGIC, version, len(payload))
    head += _U32.pack(zlib.crc32(head))
    return head + payload + _U32.pack(zlib.crc32(payload))


class _Writable(Protocol):
    def write(self, data: bytes) -> object: ...


def store_checkpoint_metadata(
    metadata: CheckpointMetadata, out: _Writable | None = None, version: int = CURRENT_VERSION
) -> bytes:
    """Serialise ``metadata`` as a complete ``_metadata`` file; write it to ``out`` if given."""
    data = encode_frame(version, MetadataSerializers.get_serializer(version).serialize(metadata))
    if out is not None:
        out.write(data)
    return data


def load_checkpoint_metadata(
    data: bytes, exclusive_dir: str | None, source: str | None = None
) -> CheckpointMetadata:
    """Parse a ``_metadata`` file loaded from the snapshot directory ``exclusive_dir``.

    Relative (savepoint) paths resolve against ``exclusive_dir``; every file path must lie
    in the snapshot's directories (``paths.SnapshotPaths``), else ``UnsafeStatePathError``.
    """
    size = len(data)
    if size < len(MAGIC):
        if MAGIC.startswith(bytes(data)):
            raise metadata_format_error(
                "truncated", f"file ends after {size} bytes, inside the magic number", size, source
            )
    if bytes(data[: len(MAGIC)]) != MAGIC:
        raise metadata_format_error(
            "bad magic",
            f"expected {MAGIC!r}, found {bytes(data[:4])!r}: not a sparkpoint metadata file "
            "(a Flink _metadata file, some other file, or a corrupted one)",
            0,
            source,
        )
    if size < HEADER_SIZE:
        raise metadata_format_error(
            "truncated",
            f"file ends after {size} bytes, inside the {HEADER_SIZE}-byte header",
            size,
            source,
        )
    _, version, length = _HEADER.unpack_from(data, 0)
    (header_crc,) = _U32.unpack_from(data, 16)
    if zlib.crc32(data[:16]) != header_crc:
        raise metadata_format_error(
            "checksum mismatch",
            "header checksum does not match bytes 0..15 (version or length corrupted)",
            16,
            source,
        )
    try:
        serializer = MetadataSerializers.get_serializer(version)
    except KeyError:
        known = ", ".join(map(str, MetadataSerializers.versions()))
        raise metadata_format_error(
            f"unknown version {version}",
            f"this sparkpoint reads metadata versions {known}; the file was written by a "
            "newer (or incompatible) release",
            4,
            source,
        ) from None
    expected = HEADER_SIZE + length + TRAILER_SIZE
    if size < expected:
        raise metadata_format_error(
            "truncated",
            f"file has {size} bytes but its header declares {expected} "
            f"({length} payload bytes); it was cut short",
            size,
            source,
        )
    if size > expected:
        raise metadata_format_error(
            "trailing bytes",
            f"file has {size} bytes but its header declares {expected}",
            expected,
            source,
        )
    payload = bytes(data[HEADER_SIZE : HEADER_SIZE + length])
    (payload_crc,) = _U32.unpack_from(data, HEADER_SIZE + length)
    if zlib.crc32(payload) != payload_crc:
        raise metadata_format_error(
            "checksum mismatch",
            f"payload checksum (stored at offset {HEADER_SIZE + length}) does not match "
            f"bytes {HEADER_SIZE}..{HEADER_SIZE + length - 1}: the file is corrupted",
            HEADER_SIZE + length,
            source,
        )
    return serializer.deserialize(payload, SnapshotPaths(exclusive_dir, source), HEADER_SIZE)


class _Resolver(Protocol):
    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation: ...


def load_checkpoint(
    storage: _Resolver, pointer: str
) -> tuple[CheckpointMetadata, CompletedCheckpointStorageLocation]:
    """Resolve ``pointer`` through ``storage`` (storage or storage access) and load it
    (``read_metadata_bytes``: a regular file within ``MAX_METADATA_SIZE``)."""
    location = storage.resolve_checkpoint(pointer)
    handle = location.metadata_handle
    source = handle.path if isinstance(handle, FileStateHandle) else location.external_pointer
    data = read_metadata_bytes(handle, source)
    return load_checkpoint_metadata(data, location.exclusive_dir, source), location


def write_metadata(
    location: CheckpointStorageLocation, metadata: CheckpointMetadata
) -> CompletedCheckpointStorageLocation:
    """Serialise ``metadata`` and publish it atomically as the location's ``_metadata``.

    Placeholders must have been resolved first (``SharedStateRegistry.register_all``): a
    ``_metadata`` holding one could not be restored on its own.
    """
    for op in metadata.operator_states:
        for index, sub in op.subtask_states.items():
            for handle in (*sub.managed_keyed_state, *sub.raw_keyed_state):
                if isinstance(handle, IncrementalRemoteKeyedStateHandle):
                    for item in handle.shared_state:
                        if isinstance(item.handle, PlaceholderStreamStateHandle):
                            raise ValueError(
                                f"Checkpoint {metadata.checkpoint_id}, operator "
                                f"{op.operator_id} subtask {index}: shared file "
                                f"{item.local_path!r} is still a placeholder for "
                                f"{item.handle.shared_key!r}; register the operator states "
                                "with the SharedStateRegistry (register_all) before writing "
                                "_metadata"
                            )
    return write_metadata_bytes(location, store_checkpoint_metadata(metadata))
