"""FileSystem over pyarrow.fs: local disk and HDFS (and the reads of S3 and GCS).

Paths come in as URIs or plain paths and go back out in the same form; the pyarrow
filesystem sees its native form (``/abs/path`` locally and on HDFS, ``bucket/key`` on
object stores). The pyarrow filesystem is created lazily, so building one never connects
and instances pickle by their construction arguments.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import uuid
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, cast

import pyarrow.fs as pafs

from sparkpoint.errors import StorageError
from sparkpoint.fs.base import FileInfo, FileSystem, refusal, too_large

__all__ = [
    "ArrowFileSystem",
    "LocalFileSystem",
    "hdfs_filesystem",
    "split_endpoint",
]


class ArrowFileSystem(FileSystem):
    """A FileSystem backed by a lazily created ``pyarrow.fs.FileSystem``.

    pyarrow has no create-if-absent, so a no-overwrite create checks for the file and then
    writes it (``atomic_create`` is false: two writers may both pass the check). On object
    stores ``write_atomic`` is a single PUT; elsewhere it writes a temporary file in the
    target directory and renames it.
    """

    non_atomic_reason = (
        "pyarrow's client has no create-if-absent, so a create checks for the file and then "
        "writes it"
    )

    def __init__(
        self,
        scheme: str,
        factory: Callable[[], pafs.FileSystem],
        *,
        is_object_store: bool,
        keeps_authority: bool = False,
    ) -> None:
        self.scheme = scheme
        self.is_object_store = is_object_store
        self._factory = factory
        self._keeps_authority = keeps_authority
        self._arrow: pafs.FileSystem | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_arrow"] = None
        return state

    @property
    def arrow(self) -> pafs.FileSystem:
        """The underlying pyarrow filesystem (created on first use)."""
        if self._arrow is None:
            self._arrow = self._factory()
        return self._arrow

    def native(self, path: str) -> str:
        """The path as the pyarrow filesystem spells it."""
        _, sep, rest = path.partition("://")
        if not sep:
            native = path
        elif self._keeps_authority:
            native = "/" + rest.partition("/")[2]
        else:
            native = rest
        stripped = native.rstrip("/")
        return stripped or native

    # ---- reading --------------------------------------------------------------------

    def open_input(self, path: str) -> BinaryIO:
        return cast(BinaryIO, self.arrow.open_input_file(self.native(path)))

    def read_bytes(self, path: str) -> bytes:
        with self.arrow.open_input_stream(self.native(path)) as stream:
            return bytes(stream.read())

    def _info(self, path: str) -> pafs.FileInfo:
        return self.arrow.get_file_info(self.native(path))

    def exists(self, path: str) -> bool:
        return bool(self._info(path).type != pafs.FileType.NotFound)

    def is_dir(self, path: str) -> bool:
        return bool(self._info(path).type == pafs.FileType.Directory)

    def size(self, path: str) -> int:
        info = self._info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"No such file: {path}")
        if info.type == pafs.FileType.Directory:
            raise IsADirectoryError(f"Is a directory: {path}")
        if info.type != pafs.FileType.File:
            raise StorageError(refusal(path, "a file", "it is not a regular file"))
        return int(info.size)

    def list(self, path: str, *, recursive: bool = False) -> list[FileInfo]:
        base = self.native(path)
        selector = pafs.FileSelector(base, recursive=recursive, allow_not_found=True)
        try:
            infos = self.arrow.get_file_info(selector)
        except NotADirectoryError:
            return []
        prefix = path.rstrip("/")
        out = []
        for info in infos:
            rel = info.path[len(base) :].lstrip("/")
            is_dir = info.type == pafs.FileType.Directory
            out.append(FileInfo(f"{prefix}/{rel}", 0 if is_dir else int(info.size), is_dir))
        return sorted(out, key=lambda i: i.path)

    # ---- writing --------------------------------------------------------------------

    def open_output(self, path: str, *, overwrite: bool = False) -> BinaryIO:
        if not overwrite and self.exists(path):
            raise FileExistsError(f"File already exists: {path}")
        return cast(BinaryIO, self.arrow.open_output_stream(self.native(path)))

    def write_atomic(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if not overwrite and self.exists(path):
            raise FileExistsError(f"File already exists: {path}")
        if self.is_object_store:
            with self.arrow.open_output_stream(self.native(path)) as out:
                out.write(data)
            return
        tmp = self.join(self.parent(path), f".{self.name(path)}.{uuid.uuid4().hex}.inprogress")
        try:
            with self.arrow.open_output_stream(self.native(tmp)) as out:
                out.write(data)
            if not overwrite and self.exists(path):
                raise FileExistsError(f"File already exists: {path}")
            self.arrow.move(self.native(tmp), self.native(path))
        finally:
            with contextlib.suppress(OSError):
                if self.exists(tmp):
                    self.arrow.delete_file(self.native(tmp))

    def mkdirs(self, path: str) -> None:
        if not self.is_object_store:
            self.arrow.create_dir(self.native(path), recursive=True)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        info = self._info(path)
        if info.type == pafs.FileType.NotFound:
            return
        if info.type != pafs.FileType.Directory:
            self.arrow.delete_file(self.native(path))
            return
        if not recursive and self.list(path):
            raise OSError(f"Directory not empty: {path}")
        self.arrow.delete_dir(self.native(path))

    def rename(self, src: str, dst: str) -> None:
        self.arrow.move(self.native(src), self.native(dst))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scheme={self.scheme!r})"


class LocalFileSystem(ArrowFileSystem):
    """Local disk: exclusive create with ``O_EXCL`` and publish by link/rename in the dir."""

    atomic_create = True

    def __init__(self) -> None:
        super().__init__("file", pafs.LocalFileSystem, is_object_store=False)

    def native(self, path: str) -> str:
        if path.startswith("file://"):
            rest = path[len("file://") :]
            if rest.startswith("localhost/"):
                rest = rest[len("localhost") :]
            path = rest
        elif path.startswith("file:"):
            path = path[len("file:") :]
        path = os.path.abspath(path) if path else path
        return path

    def open_input(self, path: str) -> BinaryIO:
        return open(self.native(path), "rb")

    def read_bytes(self, path: str) -> bytes:
        with open(self.native(path), "rb") as f:
            return f.read()

    def size(self, path: str) -> int:
        """The size of the file ``path`` (links followed); a FIFO, device or socket has none
        and is refused (``StorageError``)."""
        try:
            info = os.stat(self.native(path))
        except FileNotFoundError:
            raise FileNotFoundError(f"No such file: {path}") from None
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(f"Is a directory: {path}")
        _require_regular(info.st_mode, path, "a file")
        return info.st_size

    def read_regular_file(self, path: str, max_bytes: int, what: str = "a file") -> bytes:
        """The file when it is a regular file of at most ``max_bytes``: a symbolic link,
        FIFO, device or socket is refused before it is opened (``lstat``), and the open
        neither follows a link nor waits for a FIFO's writer, should one be swapped in."""
        native = self.native(path)
        _require_regular(os.lstat(native).st_mode, path, what)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(native, flags)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StorageError(refusal(path, what, "it is a symbolic link")) from None
            raise
        try:
            info = os.fstat(fd)
            _require_regular(info.st_mode, path, what)
            if info.st_size > max_bytes:
                raise StorageError(too_large(path, what, info.st_size, max_bytes))
            chunks: list[bytes] = []
            left = max_bytes + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
        if left <= 0:
            raise StorageError(too_large(path, what, max_bytes + 1, max_bytes, grew=True))
        return b"".join(chunks)

    def open_output(self, path: str, *, overwrite: bool = False) -> BinaryIO:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        fd = os.open(self.native(path), flags, 0o666)
        return os.fdopen(fd, "wb")

    def write_atomic(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        target = self.native(path)
        directory = os.path.dirname(target)
        tmp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.inprogress")
        try:
            with open(tmp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if overwrite:
                os.replace(tmp, target)
            else:
                _publish_exclusive(tmp, target)
            _fsync_dir(directory)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def mkdirs(self, path: str) -> None:
        os.makedirs(self.native(path), exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        os.replace(self.native(src), self.native(dst))

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]


_NOT_REGULAR = (
    (stat.S_ISLNK, "it is a symbolic link"),
    (stat.S_ISDIR, "it is a directory"),
    (stat.S_ISFIFO, "it is a FIFO (named pipe)"),
    (stat.S_ISCHR, "it is a character device"),
    (stat.S_ISBLK, "it is a block device"),
    (stat.S_ISSOCK, "it is a socket"),
)


def _require_regular(mode: int, path: str, what: str) -> None:
    """Refuse (``StorageError``) unless ``mode`` is a regular file's."""
    if stat.S_ISREG(mode):
        return
    why = next((text for test, text in _NOT_REGULAR if test(mode)), "it is not a regular file")
    raise StorageError(refusal(path, what, why))


def _publish_exclusive(tmp: str, target: str) -> None:
    """Move ``tmp`` to ``target`` atomically unless ``target`` exists (``FileExistsError``).

    A hard link publishes atomically and refuses to replace an existing file. Where the
    filesystem has no hard links, a check-then-rename is used (two racing publishers may
    then both succeed, the later one winning).
    """
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "File exists", target) from None
        os.rename(tmp, target)


def _fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (best effort: not every OS allows it)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def split_endpoint(endpoint: str) -> tuple[str | None, str]:
    """``http://host:port`` -> (``http``, ``host:port``); bare ``host:port`` keeps scheme None."""
    scheme, sep, rest = endpoint.partition("://")
    return (scheme, rest.rstrip("/")) if sep else (None, endpoint.rstrip("/"))


def hdfs_filesystem(
    authority: str, options: Mapping[str, str], env: Mapping[str, str]
) -> ArrowFileSystem:
    """HDFS through pyarrow's libhdfs binding for ``hdfs://host:port`` (``hdfs.user``)."""
    host, _, port = authority.partition(":")
    if port and not port.isdigit():
        raise ValueError(f"Invalid HDFS port in authority {authority!r}")
    user = options.get("hdfs.user") or env.get("HADOOP_USER_NAME")
    factory = functools.partial(pafs.HadoopFileSystem, host or "default", int(port or 0), user=user)
    return ArrowFileSystem("hdfs", factory, is_object_store=False, keeps_authority=True)
