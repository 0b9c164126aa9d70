"""The one filesystem interface the rest of sparkpoint uses; paths are full URIs or plain paths."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import BinaryIO

from sparkpoint.config.filesystem import FileSystemOptions
from sparkpoint.errors import StorageError

__all__ = ["FileInfo", "FileSystem", "refusal", "too_large"]


def refusal(path: str, what: str, why: str) -> str:
    """The message refusing to read ``path`` as ``what`` (``why`` says what it is instead)."""
    return f"Refusing to read {path} as {what}: {why}; only a regular file is read"


def too_large(path: str, what: str, size: int, max_bytes: int, grew: bool = False) -> str:
    """The message refusing ``path`` (``size`` bytes) as ``what`` over a ``max_bytes`` cap."""
    held = f"it grew past {max_bytes} bytes while read" if grew else f"it holds {size} bytes"
    return (
        f"Refusing to read {path} as {what}: {held}, more than the {max_bytes} bytes "
        f"({max_bytes / 1024**2:g} MiB) sparkpoint reads from {what}"
    )


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One listing entry: full path (same form as given to ``list``), size, and whether a dir."""

    path: str
    size: int
    is_dir: bool


class FileSystem(abc.ABC):
    """A filesystem reached through pyarrow.fs or fsspec.

    Every method takes full paths in the form the filesystem was resolved from (``s3://b/k``,
    ``/tmp/x``, ``file:///tmp/x``, ``memory://x``) and returns paths in that same form.
    Object stores have no directories: ``mkdirs`` is a no-op there and listing is by prefix.
    """

    scheme: str = "file"
    is_object_store: bool = False
    atomic_create: bool = False
    """Whether a no-overwrite create is decided by the storage in one step, so that of two
    writers of one path exactly one succeeds and the other gets ``FileExistsError``."""
    non_atomic_reason: str = "this file system does not declare atomic creation"
    """Why creates are not atomic here and what would make them so (unused when atomic)."""
    entropy_key: str | None = None
    """Object-store entropy marker (``s3.entropy.key``); ``None`` when not injecting."""
    entropy_length: int = FileSystemOptions.S3_ENTROPY_LENGTH.default
    """How many random characters replace the marker (``s3.entropy.length``)."""

    @abc.abstractmethod
    def open_input(self, path: str) -> BinaryIO:
        """A readable, seekable binary stream; ``FileNotFoundError`` if ``path`` is absent."""

    @abc.abstractmethod
    def open_output(self, path: str, *, overwrite: bool = False) -> BinaryIO:
        """A binary output stream; with ``overwrite=False`` an existing file is never replaced
        (``FileExistsError``). Does not create parent directories and does not check them."""

    def discard_output(self, stream: BinaryIO, path: str) -> None:
        """Abandon a stream from ``open_output(path)``: nothing it wrote stays at ``path``.

        Here the file exists from the open on and is this writer's, so it is closed and
        deleted. Object stores publish only on close and override this to publish nothing.
        """
        try:
            stream.close()
        finally:
            self.delete(path)

    @abc.abstractmethod
    def write_atomic(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Publish ``data`` at ``path`` so a reader sees all of it or nothing.

        Local/HDFS: a temporary name in the target directory, then a rename. Object stores: a
        single PUT (conditional ``If-None-Match`` when ``overwrite`` is false, where supported).
        """

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """The whole file."""

    def read_regular_file(self, path: str, max_bytes: int, what: str = "a file") -> bytes:
        """The whole file at ``path`` when it is a plain file of at most ``max_bytes`` bytes.

        Otherwise a ``StorageError`` naming the file, ``what`` it was read as and the limit,
        before more than ``max_bytes + 1`` bytes are read. Object stores hold nothing but
        plain objects; local disk overrides this to refuse links, FIFOs, devices and sockets
        without blocking on them.
        """
        if self.is_dir(path):
            raise StorageError(refusal(path, what, "it is a directory"))
        size = self.size(path)
        if size > max_bytes:
            raise StorageError(too_large(path, what, size, max_bytes))
        with self.open_input(path) as stream:
            data = bytes(stream.read(max_bytes + 1))
        if len(data) > max_bytes:
            raise StorageError(too_large(path, what, len(data), max_bytes, grew=True))
        return data

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether a file or directory (or, on object stores, any key under the prefix) exists."""

    @abc.abstractmethod
    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (a non-empty prefix on object stores)."""

    @abc.abstractmethod
    def size(self, path: str) -> int:
        """Size of a file in bytes."""

    @abc.abstractmethod
    def mkdirs(self, path: str) -> None:
        """Create ``path`` and its parents (no-op on object stores)."""

    @abc.abstractmethod
    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file, or a directory (``recursive`` for a non-empty one); absent is fine."""

    @abc.abstractmethod
    def list(self, path: str, *, recursive: bool = False) -> list[FileInfo]:
        """Entries directly under ``path`` (all below it with ``recursive``); [] if absent."""

    @abc.abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` (a copy and delete on object stores)."""

    def join(self, base: str, *parts: str) -> str:
        """``base/part/...`` with exactly one separator between parts."""
        out = base.rstrip("/")
        for part in parts:
            out = f"{out}/{part.strip('/')}"
        return out

    def parent(self, path: str) -> str:
        """The directory holding ``path``."""
        stripped = path.rstrip("/")
        head, _, _ = stripped.rpartition("/")
        return head if head and not head.endswith(":/") else stripped[: len(head) + 1]

    def name(self, path: str) -> str:
        """The last component of ``path``."""
        return path.rstrip("/").rpartition("/")[2]
