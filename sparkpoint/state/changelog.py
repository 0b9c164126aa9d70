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
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa

from sparkpoint.errors import RestoreError

__all__ = [
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


def decode_kv_changes(payload: memoryview | bytes) -> list[tuple[bytes, bytes | None]]:
    """The writes of ``encode_kv_changes``, in order."""
    out: list[tuple[bytes, bytes | None]] = []
    with pa.ipc.open_stream(pa.py_buffer(payload)) as reader:
        for batch in reader:
            out.extend(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()))
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
