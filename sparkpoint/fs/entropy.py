"""Entropy injection for object stores (Flink's ``s3.entropy.key`` / ``s3.entropy.length``).

Object stores spread load by key prefix. When a filesystem has an entropy key configured,
files created *with injection* (checkpoint data files only) get the key in their path
replaced by random alphanumerics; every other use of such a path (directories, the
``_metadata`` file) has the key removed.
"""

from __future__ import annotations

import random
import string
from typing import BinaryIO

from sparkpoint.fs.base import FileSystem

__all__ = [
    "create_entropy_aware",
    "generate_entropy",
    "is_entropy_injecting",
    "remove_entropy_marker_if_present",
    "resolve_entropy",
]

_ALPHANUMERIC = string.ascii_letters + string.digits
_random = random.SystemRandom()


def generate_entropy(length: int) -> str:
    """``length`` random characters from ``[a-zA-Z0-9]``."""
    return "".join(_random.choice(_ALPHANUMERIC) for _ in range(length))


def is_entropy_injecting(fs: FileSystem, path: str | None = None) -> bool:
    """Whether ``fs`` injects entropy (and, given ``path``, whether the path has the key)."""
    key = fs.entropy_key
    if not key:
        return False
    return path is None or key in _path_part(path)[1]


def resolve_entropy(path: str, key: str, length: int, *, inject: bool) -> str:
    """``path`` with the first ``key`` in its path part replaced (inject) or removed."""
    head, body = _path_part(path)
    index = body.find(key)
    if index < 0:
        return path
    replacement = generate_entropy(length) if inject else ""
    rewritten = body[:index] + replacement + body[index + len(key) :]
    if not inject:
        while "//" in rewritten:
            rewritten = rewritten.replace("//", "/")
    return head + rewritten


def remove_entropy_marker_if_present(fs: FileSystem, path: str) -> str:
    """``path`` without the entropy key (unchanged when ``fs`` injects no entropy)."""
    if not fs.entropy_key:
        return path
    return resolve_entropy(path, fs.entropy_key, fs.entropy_length, inject=False)


def create_entropy_aware(
    fs: FileSystem, path: str, *, overwrite: bool = False
) -> tuple[BinaryIO, str]:
    """Open ``path`` for writing with entropy injected; returns the stream and actual path."""
    actual = path
    if fs.entropy_key:
        actual = resolve_entropy(path, fs.entropy_key, fs.entropy_length, inject=True)
    return fs.open_output(actual, overwrite=overwrite), actual


def _path_part(path: str) -> tuple[str, str]:
    """Split ``scheme://authority`` (kept verbatim) from the path part of ``path``."""
    scheme, sep, rest = path.partition("://")
    if not sep:
        return "", path
    authority, slash, body = rest.partition("/")
    return f"{scheme}://{authority}", slash + body
