"""The ``_metadata`` binary format: a checksummed frame around a versioned payload.

Frame (all integers big-endian; the frame never changes between versions)::

    offset  size  field
    0       4     magic b"SPKM"
    4       4     u32 format version (selects the payload's serializer, ``serializers``)
    8       8     u64 payload length L
    16      4     u32 CRC32 of bytes 0..15 (the header)
    20      L     payload
    20+L    4     u32 CRC32 of the payload
    24+L    4     magic b"SPKS"                        } only when signed
    28+L    32    HMAC-SHA256 of bytes 0..28+L-1       } (sparkpoint.snapshot.signing-key)

A reader checks, in order: magic, that the header is complete, the header checksum, that the
version is known, that the file has exactly the declared length (plus the signature, when
there is one), the signature when a key is configured, and the payload checksum. Each failure
raises ``MetadataFormatError`` naming the file (when known), the kind of problem (``bad
magic``, ``truncated``, ``checksum mismatch``, ``unknown version N``, ``malformed``) and the
byte offset; an unsigned file or a signature that does not match the configured key raises
``SnapshotSignatureError``. The signature covers every state file through the SHA-256 each
file handle records. Payloads are never pickled.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import struct
import zlib
from typing import Protocol

from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
)
from sparkpoint.checkpoint.metadata.checkpoint_metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.serializer import MetadataSerializer, metadata_format_error
from sparkpoint.checkpoint.metadata.serializers import CURRENT_VERSION, MetadataSerializers
from sparkpoint.checkpoint.paths import SnapshotPaths
from sparkpoint.checkpoint.storage import (
    CheckpointStorageLocation,
    CompletedCheckpointStorageLocation,
    read_metadata_bytes,
    write_metadata_bytes,
)
from sparkpoint.checkpoint.trust import SnapshotTrust, default_trust
from sparkpoint.errors import MetadataFormatError, SnapshotSignatureError

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "encode_frame",
    "is_signed",
    "load_checkpoint",
    "load_checkpoint_file",
    "load_checkpoint_metadata",
    "sign_frame",
    "signed_with",
    "store_checkpoint_metadata",
    "write_metadata",
]

MAGIC = b"SPKM"
HEADER_SIZE = 20
TRAILER_SIZE = 4
_HEADER = struct.Struct(">4sIQ")
_U32 = struct.Struct(">I")
SIGNATURE_MAGIC = b"SPKS"
SIGNATURE_SIZE = len(SIGNATURE_MAGIC) + hashlib.sha256().digest_size
_CHECKPOINT_DIR = re.compile(r"^chk-([0-9]+)$")


# ---- framing ------------------------------------------------------------------------------


def encode_frame(version: int, payload: bytes) -> bytes:
    """The complete file: header with checksum, ``payload``, payload checksum."""
    head = _HEADER.pack(MAGIC, version, len(payload))
    head += _U32.pack(zlib.crc32(head))
    return head + payload + _U32.pack(zlib.crc32(payload))


class _Writable(Protocol):
    def write(self, data: bytes) -> object: ...


def _mac(key: bytes, signed_part: bytes | memoryview) -> bytes:
    return hmac.new(key, signed_part, hashlib.sha256).digest()


def sign_frame(frame: bytes, key: bytes) -> bytes:
    """``frame`` (a complete unsigned file) followed by its signature under ``key``."""
    signed_part = frame + SIGNATURE_MAGIC
    return signed_part + _mac(key, signed_part)


def store_checkpoint_metadata(
    metadata: CheckpointMetadata,
    out: _Writable | None = None,
    version: int = CURRENT_VERSION,
    *,
    signing_key: bytes | None = None,
) -> bytes:
    """Serialise ``metadata`` as a complete ``_metadata`` file (signed with ``signing_key``
    when given); write it to ``out`` if given."""
    data = encode_frame(version, MetadataSerializers.get_serializer(version).serialize(metadata))
    if signing_key is not None:
        data = sign_frame(data, signing_key)
    if out is not None:
        out.write(data)
    return data


def load_checkpoint_metadata(
    data: bytes,
    exclusive_dir: str | None,
    source: str | None = None,
    *,
    trust: SnapshotTrust | None = None,
) -> CheckpointMetadata:
    """Parse a ``_metadata`` file loaded from the snapshot directory ``exclusive_dir``.

    Relative (savepoint) paths resolve against ``exclusive_dir``; every file path must lie
    in the snapshot's directories (``paths.SnapshotPaths``), else ``UnsafeStatePathError``.
    With a signing key in ``trust`` (default: ``trust.default_trust()``), an unsigned file
    or a mismatched signature raises ``SnapshotSignatureError`` before the payload is read.
    """
    trust = default_trust() if trust is None else trust
    length, serializer = _check_frame(data, source)
    expected = HEADER_SIZE + length + TRAILER_SIZE
    _check_signature(data, expected, trust, source)
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


def signed_with(data: bytes, key: bytes) -> bool:
    """Whether a ``_metadata`` file (already read without error) carries a signature that
    ``key`` made (the origin key of a checkpoint directory, ``checkpoint.origin``)."""
    if not is_signed(data):
        return False
    end = len(data) - SIGNATURE_SIZE
    expected = _mac(key, memoryview(data)[: end + len(SIGNATURE_MAGIC)])
    return hmac.compare_digest(expected, bytes(data[end + len(SIGNATURE_MAGIC) :]))


def is_signed(data: bytes) -> bool:
    """Whether a ``_metadata`` file (already read without error) carries a signature."""
    if len(data) < HEADER_SIZE:
        return False
    _, _, length = _HEADER.unpack_from(data, 0)
    end = HEADER_SIZE + length + TRAILER_SIZE
    return len(data) == end + SIGNATURE_SIZE and data[end : end + 4] == SIGNATURE_MAGIC


def _check_signature(data: bytes, end: int, trust: SnapshotTrust, source: str | None) -> None:
    """Refuse, with a key configured, a file without a signature or with a wrong one."""
    where = f"checkpoint metadata file {source}" if source else "checkpoint metadata"
    signed = len(data) > end
    if trust.signing_key is None:
        return
    if not signed:
        raise SnapshotSignatureError(
            f"Refusing unsigned {where}: a snapshot signing key is configured "
            "(sparkpoint.snapshot.signing-key), and only snapshots signed with it are read"
        )
    expected = _mac(trust.signing_key, memoryview(data)[: end + len(SIGNATURE_MAGIC)])
    if not hmac.compare_digest(expected, bytes(data[end + len(SIGNATURE_MAGIC) :])):
        raise SnapshotSignatureError(
            f"Refusing {where}: its signature does not match the configured signing key "
            "(the file or a state file digest in it was changed, or another key signed it)"
        )


def _check_frame(data: bytes, source: str | None) -> tuple[int, MetadataSerializer]:
    """The payload length and serializer of a complete frame (signature trailer aside)."""
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
    signed = size == expected + SIGNATURE_SIZE and (
        bytes(data[expected : expected + len(SIGNATURE_MAGIC)]) == SIGNATURE_MAGIC
    )
    if size > expected and not signed:
        raise metadata_format_error(
            "trailing bytes",
            f"file has {size} bytes but its header declares {expected} (or "
            f"{expected + SIGNATURE_SIZE} with a signature)",
            expected,
            source,
        )
    return length, serializer


class _Resolver(Protocol):
    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation: ...


def load_checkpoint(
    storage: _Resolver, pointer: str, *, trust: SnapshotTrust | None = None
) -> tuple[CheckpointMetadata, CompletedCheckpointStorageLocation]:
    """Resolve ``pointer`` through ``storage`` (storage or storage access) and load it
    (``read_metadata_bytes``: a regular file within ``MAX_METADATA_SIZE``), checked against
    ``trust`` as ``load_checkpoint_metadata`` does."""
    metadata, location, _ = load_checkpoint_file(storage, pointer, trust=trust)
    return metadata, location


def load_checkpoint_file(
    storage: _Resolver, pointer: str, *, trust: SnapshotTrust | None = None
) -> tuple[CheckpointMetadata, CompletedCheckpointStorageLocation, bytes]:
    """``load_checkpoint``, and the ``_metadata`` bytes read (to judge their signature).

    A ``chk-<N>`` directory whose ``_metadata`` holds another checkpoint id is refused: the
    id is signed, so a signed ``_metadata`` cannot be replayed under another checkpoint's
    name."""
    location = storage.resolve_checkpoint(pointer)
    handle = location.metadata_handle
    source = handle.path if isinstance(handle, FileStateHandle) else location.external_pointer
    data = read_metadata_bytes(handle, source)
    metadata = load_checkpoint_metadata(data, location.exclusive_dir, source, trust=trust)
    if location.exclusive_dir is not None:
        named = _CHECKPOINT_DIR.match(location.exclusive_dir.rstrip("/").rsplit("/", 1)[-1])
        if named is not None and int(named.group(1)) != metadata.checkpoint_id:
            raise MetadataFormatError(
                f"Refusing checkpoint metadata file {source}: it holds checkpoint "
                f"{metadata.checkpoint_id}, not {int(named.group(1))} as its directory's name "
                "says (a copied or replayed _metadata?)"
            )
    return metadata, location, data


def write_metadata(
    location: CheckpointStorageLocation,
    metadata: CheckpointMetadata,
    *,
    signing_key: bytes | None = None,
) -> CompletedCheckpointStorageLocation:
    """Serialise ``metadata`` (signed with ``signing_key`` when given) and publish it
    atomically as the location's ``_metadata``.

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
    data = store_checkpoint_metadata(metadata, signing_key=signing_key)
    return write_metadata_bytes(location, data)
