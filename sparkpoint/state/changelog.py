"""The durable changelog of a keyed subtask: what each epoch's local commit changed.

A backend that tracks changes (``KeyedStateBackend.track_changes``) hands the runtime the
changes of every local commit as bytes in its own terms (the heap backend: the key-group
blocks it rewrote; RocksDB: the key/value writes and deletes). The runtime stores them
beside the checkpoints, one entry per epoch, and a subtask that lost its local state
restores the latest completed checkpoint and applies every later entry in order (Flink's
changelog state backend and Spark's RocksDB changelog checkpointing do the same). Entries
up to a completed checkpoint are deleted.

An entry is ``MAGIC + version + backend name + payload``, so a heap entry is never applied
to RocksDB state or the other way round. Version 2 payloads are zstd-compressed (after the
8-byte uncompressed size): an epoch's changes shrink 3-5x for a few milliseconds, and
writing them was most of what the changelog cost (version 1, uncompressed, still reads).

Decoding is bounded by the entry's own bytes: the declared uncompressed size may not exceed
what zstd can expand the compressed bytes to (``MAX_ZSTD_RATIO``: a 128 KiB run per 4-byte
block at best), and the output is allocated at that size only; key/value payloads are
checked Arrow streams (``arrow_checks``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa

from sparkpoint.errors import CorruptStateError, RestoreError
from sparkpoint.state.arrow_checks import ArrowBlockError, read_checked_stream

__all__ = [
    "MAX_ZSTD_RATIO",
    "ChangeTracking",
    "decode_entry",
    "decode_kv_changes",
    "encode_entry",
    "encode_kv_changes",
]

_MAGIC = b"SPCL"
_VERSION = 2
_UNCOMPRESSED = 1
_CODEC = pa.Codec("zstd", compression_level=1)
# zstd's largest expansion: a 131,072-byte RLE block from a 3-byte header and 1 byte.
MAX_ZSTD_RATIO = 32768
_KV_SCHEMA = pa.schema([pa.field("k", pa.binary()), pa.field("v", pa.binary())])


def encode_entry(backend: str, payload: bytes) -> bytes:
    """One changelog entry of ``backend`` holding ``payload`` (compressed)."""
    name = backend.encode()
    compressed = _CODEC.compress(payload, asbytes=True)
    return b"".join(
        (
            _MAGIC,
            struct.pack(">BB", _VERSION, len(name)),
            name,
            struct.pack(">Q", len(payload)),
            compressed,
        )
    )


def decode_entry(raw: bytes, backend: str, where: str) -> memoryview:
    """The payload of a changelog entry written by ``backend`` (``where`` names it in
    errors); raises ``RestoreError`` for anything else."""
    view = memoryview(raw)
    if bytes(view[:4]) != _MAGIC or len(view) < 6:
        raise RestoreError(f"Changelog entry {where} is not a sparkpoint changelog entry")
    version, size = struct.unpack(">BB", view[4:6])
    if version not in (_UNCOMPRESSED, _VERSION):
        raise RestoreError(
            f"Changelog entry {where} has version {version}; this sparkpoint "
            f"reads versions {_UNCOMPRESSED} and {_VERSION}"
        )
    name = bytes(view[6 : 6 + size]).decode()
    if name != backend:
        raise RestoreError(
            f"Changelog entry {where} was written by the {name} backend and "
            f"cannot be applied to {backend} state"
        )
    payload = view[6 + size :]
    if version == _UNCOMPRESSED:
        return payload
    try:
        (length,) = struct.unpack(">Q", payload[:8])
    except struct.error as e:
        raise RestoreError(f"Changelog entry {where} is corrupt: {e}") from e
    compressed = len(payload) - 8
    if length > MAX_ZSTD_RATIO * compressed:
        raise CorruptStateError(
            f"Changelog entry {where} is corrupt: it declares {length} uncompressed bytes "
            f"for {compressed} compressed bytes, more than zstd can expand them to "
            f"({MAX_ZSTD_RATIO} per byte)"
        )
    try:
        return memoryview(_CODEC.decompress(payload[8:], length, asbytes=True))
    except (struct.error, OSError, ValueError) as e:  # truncated or corrupt bytes
        raise RestoreError(f"Changelog entry {where} is corrupt: {e}") from e


def encode_kv_changes(keys: Sequence[bytes], values: Sequence[bytes | None]) -> bytes:
    """Key/value writes (``None``: delete), in order, as one Arrow IPC stream."""
    batch = pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary())], names=["k", "v"]
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def decode_kv_changes(
    payload: memoryview | bytes, where: str = "a changelog entry"
) -> list[tuple[bytes, bytes | None]]:
    """The writes of ``encode_kv_changes``, in order; ``CorruptStateError`` naming
    ``where`` for a stream of another shape."""
    out: list[tuple[bytes, bytes | None]] = []
    try:
        for batch in read_checked_stream(payload, _KV_SCHEMA):
            if batch.column(0).null_count:
                raise ArrowBlockError("a write without its key")
            out.extend(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()))
    except ArrowBlockError as exc:
        raise CorruptStateError(f"Changelog entry {where} is corrupt: {exc}") from None
    return out


class ChangeTracking:
    """``track_changes`` and ``take_changes`` of a keyed backend that can keep a changelog:
    once ``_tracking`` is on, its ``commit_local`` stores the commit's entry in ``_changes``
    (``None``: nothing changed). Mixed in before the backend's base class."""

    _tracking = False
    _changes: bytes | None = None

    def track_changes(self) -> bool:
        """From now on, record what each ``commit_local`` changes; returns True."""
        self._tracking = True
        return True

    def take_changes(self) -> bytes | None:
        """The changelog entry of the last ``commit_local`` (taking it forgets it)."""
        changes, self._changes = self._changes, None
        return changes
