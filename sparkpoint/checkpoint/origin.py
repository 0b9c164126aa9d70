"""The origin key of a checkpoint directory: how a job recognises the snapshots that jobs
writing to the same ``execution.checkpointing.dir`` wrote (its own), without a signing key.

The first job that writes a snapshot generates a random key in
``<execution.checkpointing.dir>/_sparkpoint-origin-key`` (mode 0600 on a local disk) and
signs every ``_metadata`` it writes with it; a restore whose ``_metadata`` verifies with the
key of the restoring job's own checkpoint directory is that job's own. A snapshot from
elsewhere never does, wherever it is copied: its signature is by another key or none. The
key found next to a snapshot is never used to judge that snapshot, only the job's own.
"""

from __future__ import annotations

import secrets
import threading

from sparkpoint.checkpoint.key_files import MAX_KEY_FILE_SIZE, create_key_file, read_key_file
from sparkpoint.errors import ConfigurationError
from sparkpoint.fs import get_filesystem
from sparkpoint.fs.arrow import LocalFileSystem

__all__ = ["ORIGIN_KEY_FILE", "origin_key"]

ORIGIN_KEY_FILE = "_sparkpoint-origin-key"
_WHAT = "the checkpoint directory's origin key file"

_lock = threading.Lock()
_cache: dict[str, bytes] = {}  # directory -> its origin key, once read or created


def origin_key(directory: str, *, create: bool) -> bytes | None:
    """The origin key of the checkpoint directory ``directory``; ``None`` when it has none
    and ``create`` is false. With ``create``, a missing key is generated (the directory
    too). ``ConfigurationError`` when the key file cannot be read or is open to others."""
    with _lock:
        key = _cache.get(directory)
        if key is None:
            key = _read_or_create(directory, create)
            if key is not None:
                _cache[directory] = key
        return key


def _read_or_create(directory: str, create: bool) -> bytes | None:
    fs = get_filesystem(directory)
    path = fs.join(directory, ORIGIN_KEY_FILE)
    if isinstance(fs, LocalFileSystem):
        native = fs.native(path)
        if fs.exists(path):
            return read_key_file(native, _WHAT)
        return create_key_file(native, _WHAT) if create else None
    if not fs.exists(path):
        if not create:
            return None
        fs.mkdirs(directory)
        try:
            fs.write_atomic(path, secrets.token_hex(32).encode("ascii"), overwrite=False)
        except FileExistsError:
            pass  # another job published it first: use that one
    data = fs.read_regular_file(path, MAX_KEY_FILE_SIZE, _WHAT).strip()
    if not data:
        raise ConfigurationError(f"The checkpoint directory's origin key file {path!r} is empty")
    return data
