"""FileSystem over fsspec: ``memory://`` for tests and any scheme pyarrow does not serve.

No-overwrite create uses fsspec's exclusive ``xb`` mode where the implementation supports
it (memory, s3fs, local); otherwise it checks for the file first, which leaves a race
between two writers of the same path. ``write_atomic`` is one ``pipe_file`` call: a single
PUT on object stores, a single in-memory assignment for ``memory://``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO, cast

import fsspec

from sparkpoint.fs.base import FileInfo, FileSystem

__all__ = ["FsspecFileSystem"]

_DIRECTORY_SCHEMES = frozenset({"memory", "file", "local", "hdfs", "webhdfs", "sftp", "ftp"})


class FsspecFileSystem(FileSystem):
    """A FileSystem backed by ``fsspec.filesystem(protocol, **storage_options)``."""

    def __init__(self, protocol: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.scheme = protocol
        self.is_object_store = protocol not in _DIRECTORY_SCHEMES
        self._storage_options = dict(storage_options or {})
        self._fs: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fs"] = None
        return state

    @property
    def fsspec(self) -> Any:
        """The underlying fsspec filesystem (created on first use)."""
        if self._fs is None:
            self._fs = fsspec.filesystem(self.scheme, **self._storage_options)
        return self._fs

    def native(self, path: str) -> str:
        """The path as the fsspec filesystem spells it (protocol stripped)."""
        return str(self.fsspec._strip_protocol(path))

    # ---- reading --------------------------------------------------------------------

    def open_input(self, path: str) -> BinaryIO:
        return cast(BinaryIO, self.fsspec.open(self.native(path), "rb"))

    def read_bytes(self, path: str) -> bytes:
        return bytes(self.fsspec.cat_file(self.native(path)))

    def exists(self, path: str) -> bool:
        return bool(self.fsspec.exists(self.native(path)))

    def is_dir(self, path: str) -> bool:
        return bool(self.fsspec.isdir(self.native(path)))

    def size(self, path: str) -> int:
        native = self.native(path)
        if self.fsspec.isdir(native):
            raise IsADirectoryError(f"Is a directory: {path}")
        return int(self.fsspec.size(native))

    def list(self, path: str, *, recursive: bool = False) -> list[FileInfo]:
        base = self.native(path).rstrip("/")
        if not self.fsspec.isdir(base):
            return []
        if recursive:
            entries = self.fsspec.find(base, withdirs=True, detail=True).values()
        else:
            entries = self.fsspec.ls(base, detail=True)
        prefix = path.rstrip("/")
        out = []
        for entry in entries:
            name = str(entry["name"]).rstrip("/")
            rel = name[len(base) :].lstrip("/") if name.startswith(base) else name
            if not rel:
                continue
            is_dir = entry.get("type") == "directory"
            out.append(
                FileInfo(f"{prefix}/{rel}", 0 if is_dir else int(entry.get("size") or 0), is_dir)
            )
        return sorted(out, key=lambda i: i.path)

    # ---- writing --------------------------------------------------------------------

    def open_output(self, path: str, *, overwrite: bool = False) -> BinaryIO:
        native = self.native(path)
        if overwrite:
            return cast(BinaryIO, self.fsspec.open(native, "wb"))
        try:
            return cast(BinaryIO, self.fsspec.open(native, "xb"))
        except (ValueError, NotImplementedError):
            if self.fsspec.exists(native):
                raise FileExistsError(f"File already exists: {path}") from None
            return cast(BinaryIO, self.fsspec.open(native, "wb"))

    def write_atomic(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        native = self.native(path)
        if not overwrite and self.fsspec.exists(native):
            raise FileExistsError(f"File already exists: {path}")
        self.fsspec.pipe_file(native, bytes(data), mode="overwrite" if overwrite else "create")

    def mkdirs(self, path: str) -> None:
        if not self.is_object_store:
            self.fsspec.makedirs(self.native(path), exist_ok=True)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        native = self.native(path)
        if not self.fsspec.exists(native):
            return
        if not self.fsspec.isdir(native):
            self.fsspec.rm_file(native)
            return
        if recursive:
            self.fsspec.rm(native, recursive=True)
            return
        if self.fsspec.ls(native, detail=False):
            raise OSError(f"Directory not empty: {path}")
        self.fsspec.rmdir(native)

    def rename(self, src: str, dst: str) -> None:
        self.fsspec.mv(self.native(src), self.native(dst))

    def __repr__(self) -> str:
        return f"FsspecFileSystem(scheme={self.scheme!r})"
