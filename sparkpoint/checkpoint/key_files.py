"""Local files holding a snapshot key (the signing key, a checkpoint directory's origin key):
read only when no one but the owner can read or write them, and generated with mode 0600.

A key is a shared secret: anyone who can read it can sign a snapshot the job then trusts
with its code (pickled state). A key file open to the group or to others is refused, with
the ``chmod`` that fixes it, rather than used.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile

from sparkpoint.errors import ConfigurationError

__all__ = ["MAX_KEY_FILE_SIZE", "create_key_file", "read_key_file"]

MAX_KEY_FILE_SIZE = 1 << 16


def read_key_file(path: str, what: str, option: str | None = None) -> bytes:
    """The key in the local file ``path`` (its bytes without surrounding whitespace);
    ``ConfigurationError`` naming ``what``, the file and the ``option`` that names it when
    it cannot be read, is not a regular file, is empty, or is open to its group or others."""
    named = f"{what} {path!r}" + (f" ({option})" if option else "")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigurationError(f"Cannot read {named}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigurationError(f"Refusing {named}: it is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ConfigurationError(
                f"Refusing {named}: its group or others may read or write it (mode "
                f"{mode:04o}), and whoever reads the key can sign snapshots this job trusts. "
                f"Run: chmod 600 {path}"
            )
        data = f.read(MAX_KEY_FILE_SIZE + 1)
    if len(data) > MAX_KEY_FILE_SIZE:
        raise ConfigurationError(
            f"Refusing {named}: larger than {MAX_KEY_FILE_SIZE} bytes (not a key)"
        )
    data = data.strip()
    if not data:
        raise ConfigurationError(f"{named[0].upper()}{named[1:]} is empty")
    return data


def create_key_file(path: str, what: str, option: str | None = None) -> bytes:
    """A new random key (64 hex digits) in the local file ``path``, created with mode 0600
    (its directory, when missing, with 0700) and published whole (written to a temporary
    file, then linked); the key already there if another process published one first."""
    parent = os.path.dirname(os.path.abspath(path))
    key = secrets.token_hex(32).encode("ascii")
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".key-", dir=parent)  # mode 0600
    except OSError as exc:
        raise ConfigurationError(f"Cannot create {what} {path!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(key + b"\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(temp, path)
    except FileExistsError:
        return read_key_file(path, what, option)
    except OSError as exc:
        raise ConfigurationError(f"Cannot create {what} {path!r}: {exc.strerror}") from None
    finally:
        os.unlink(temp)
    return key
