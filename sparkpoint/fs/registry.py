"""Resolves a path or URI to its FileSystem, configured once per process from options.

Schemes: plain paths and ``file://`` (local disk) and ``hdfs://`` through pyarrow;
``s3://``/``s3a://``/``s3n://`` through pyarrow and s3fs; ``gs://``/``gcs://`` through gcsfs
(pyarrow without it); everything else (``memory://``, ``abfs://``, ...) through fsspec.
Options are Flink's (``s3.endpoint``, ``s3.region``, ``s3.access-key``, ``s3.secret-key``,
``s3.path.style.access``, ``s3.entropy.key``, ``s3.entropy.length``, ``gs.*``,
``hdfs.user``); unset values come from the usual environment variables. Options
``<scheme>.<name>`` are passed to fsspec as ``name``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

import fsspec

from sparkpoint.fs.arrow import LocalFileSystem, hdfs_filesystem
from sparkpoint.fs.base import FileSystem
from sparkpoint.fs.fsspec_fs import FsspecFileSystem
from sparkpoint.fs.gcs import gcs_filesystem
from sparkpoint.fs.s3 import S3FileSystem, S3Options

__all__ = [
    "configure",
    "create_filesystem",
    "get_filesystem",
    "get_options",
    "is_known_scheme",
    "split_scheme",
]

_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_GCS_SCHEMES = frozenset({"gs", "gcs"})

_lock = threading.Lock()
_options: dict[str, str] = {}
_cache: dict[tuple[str, str], FileSystem] = {}


def configure(options: Mapping[str, str]) -> None:
    """Set process-wide filesystem options (``s3.endpoint``, ``s3.access-key``, entropy, ...).

    Replaces earlier options and forgets filesystems built with them.
    """
    global _options
    new = {str(k): str(v) for k, v in options.items()}
    with _lock:
        _options = new
        _cache.clear()


def get_options() -> dict[str, str]:
    """A copy of the options set by ``configure``."""
    with _lock:
        return dict(_options)


def split_scheme(path: str) -> tuple[str, str]:
    """``(scheme, authority)`` of ``path``; ``("file", "")`` for plain paths."""
    if not isinstance(path, str):
        raise TypeError(f"A path must be a str, got {type(path).__name__}")
    scheme, sep, rest = path.partition("://")
    if not sep:
        return "file", ""
    if not scheme or not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        raise ValueError(f"Invalid URI scheme in path {path!r}")
    return scheme.lower(), rest.partition("/")[0]


def is_known_scheme(scheme: str) -> bool:
    """Whether a filesystem is registered for ``scheme`` (natively or through fsspec)."""
    scheme = scheme.lower()
    if scheme in ("file", "local", "hdfs") or scheme in _S3_SCHEMES or scheme in _GCS_SCHEMES:
        return True
    return scheme in fsspec.available_protocols()


def create_filesystem(
    path: str, options: Mapping[str, str], env: Mapping[str, str] | None = None
) -> FileSystem:
    """A new (uncached) FileSystem for ``path`` built from ``options`` and ``env``."""
    env = os.environ if env is None else env
    scheme, authority = split_scheme(path)
    if scheme in ("file", "local"):
        return LocalFileSystem()
    if scheme in _S3_SCHEMES:
        return S3FileSystem(S3Options.from_options(options, env), scheme)
    if scheme in _GCS_SCHEMES:
        return gcs_filesystem(options, env, scheme)
    if scheme == "hdfs":
        return hdfs_filesystem(authority, options, env)
    prefix = f"{scheme}."
    storage = {k[len(prefix) :]: v for k, v in options.items() if k.startswith(prefix)}
    return FsspecFileSystem(scheme, storage)


def get_filesystem(path: str) -> FileSystem:
    """The filesystem that serves ``path`` (cached per scheme and, for HDFS, authority)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    scheme, authority = split_scheme(path)
    key = (scheme, authority if scheme == "hdfs" else "")
    with _lock:
        fs = _cache.get(key)
        if fs is None:
            fs = create_filesystem(path, _options)
            _cache[key] = fs
        return fs
