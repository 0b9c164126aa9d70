"""Digests of state files: computed while a state stream is written, recorded in its handle
(inside the CRC-checked, optionally signed ``_metadata``) and verified before a byte of the
file is used, so a flipped bit is an error naming the file, never a wrong result.

SHA-256 (hashlib; about 1.4 GB/s with the CPU's SHA instructions): a cryptographic digest, so
that a signed ``_metadata`` authenticates every state file through it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from typing import TYPE_CHECKING, BinaryIO, cast

from sparkpoint.errors import CorruptStateError

if TYPE_CHECKING:
    from sparkpoint.fs.base import FileSystem

__all__ = [
    "DIGEST_NAME",
    "DIGEST_SIZE",
    "copy_verified",
    "new_hasher",
    "open_state_file",
    "open_verified",
    "read_state_file",
    "verify_bytes",
]

DIGEST_NAME = "sha256"
DIGEST_SIZE = 32
_CHUNK = 1 << 20
# A verified stream is held in memory up to this size, beyond it in a local temporary file.
_SPOOL_IN_MEMORY = 64 << 20


def new_hasher() -> hashlib._Hash:
    """A fresh hasher of the state-file digest."""
    return hashlib.sha256()


def _check(path: str, size: int, digest: bytes, got_size: int, got: bytes) -> None:
    if got_size != size:
        raise CorruptStateError(
            f"State file {path} has {got_size} bytes, but its checkpoint metadata records "
            f"{size}: the file was truncated or replaced"
        )
    if got != digest:
        raise CorruptStateError(
            f"State file {path} is corrupt: its {DIGEST_NAME} digest {got.hex()} does not match "
            f"the {digest.hex()} recorded in its checkpoint metadata"
        )


def verify_bytes(path: str, size: int, digest: bytes, data: bytes | memoryview) -> None:
    """Raise ``CorruptStateError`` naming ``path`` unless ``data`` has ``size`` bytes and
    the recorded ``digest``."""
    _check(path, size, digest, len(data), hashlib.sha256(data).digest())


def _copy_hashing(src: BinaryIO, dst: BinaryIO, limit: int) -> tuple[int, bytes]:
    """Copy at most ``limit`` bytes (a longer source is seen as ``limit`` bytes)."""
    hasher = new_hasher()
    total = 0
    while total < limit and (chunk := src.read(min(_CHUNK, limit - total))):
        hasher.update(chunk)
        dst.write(chunk)
        total += len(chunk)
    return total, hasher.digest()


def _wrong_size(path: str, size: int, got: int) -> CorruptStateError:
    return CorruptStateError(
        f"State file {path} has {got} bytes, but its checkpoint metadata records {size}: "
        "the file was truncated or replaced"
    )


def read_state_file(fs: FileSystem, path: str, size: int) -> bytes:
    """The bytes of the state file at ``path``, refused unless it is a regular file of the
    recorded ``size``: a FIFO, device or link is refused before it is opened (where the
    file system can tell) and no more than ``size + 1`` bytes are ever read."""
    # one byte over the recorded size: a file one byte longer is read and named below
    data = fs.read_regular_file(path, size + 1, f"a state file of {size} recorded bytes")
    if len(data) != size:
        raise _wrong_size(path, size, len(data))
    return data


def open_state_file(fs: FileSystem, path: str, size: int) -> BinaryIO:
    """A stream over the state file at ``path`` (no digest to check), refused unless it is
    a regular file of the recorded ``size`` (held in memory up to 64 MiB, else checked by
    its listed size before it is opened)."""
    if size <= _SPOOL_IN_MEMORY:
        return io.BytesIO(read_state_file(fs, path, size))
    _check_listed_size(fs, path, size)
    return fs.open_input(path)


def _check_listed_size(fs: FileSystem, path: str, size: int) -> None:
    """Refuse a file whose listed size is not ``size`` before it is opened (a FIFO or a
    device lists 0 bytes)."""
    if fs.is_dir(path):
        raise _wrong_size(path, size, 0)
    listed = fs.size(path)
    if listed != size:
        raise _wrong_size(path, size, listed)


def open_verified(fs: FileSystem, path: str, size: int, digest: bytes) -> BinaryIO:
    """A seekable stream over the file's bytes, returned only once all of them were read
    and matched ``digest`` (a copy: what is verified is what is read, even if the file
    changes afterwards)."""
    if size <= _SPOOL_IN_MEMORY:
        data = read_state_file(fs, path, size)
        verify_bytes(path, size, digest, data)
        return io.BytesIO(data)
    _check_listed_size(fs, path, size)
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)
    try:
        with fs.open_input(path) as src:
            got_size, got = _copy_hashing(src, cast(BinaryIO, spool), size + 1)
        _check(path, size, digest, got_size, got)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return cast(BinaryIO, spool)


def copy_verified(fs: FileSystem, path: str, size: int, digest: bytes, target: str) -> None:
    """Copy the file to the local path ``target``, verifying ``digest``; on a mismatch the
    copy is deleted before ``CorruptStateError`` is raised."""
    _check_listed_size(fs, path, size)
    try:
        with fs.open_input(path) as src, open(target, "wb") as out:
            got_size, got = _copy_hashing(src, cast(BinaryIO, out), size + 1)
        _check(path, size, digest, got_size, got)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        raise
