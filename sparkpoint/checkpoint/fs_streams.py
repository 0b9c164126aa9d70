"""Checkpoint streams into files (FileSystemCheckpointStorage), with Flink's exact behaviour.

State at or below the threshold never touches the filesystem: it is returned inline and
ends up inside ``_metadata``. Larger state goes to a file with a random UUID name (its
handle records the SHA-256 of its bytes, computed as they are written), created
without overwrite (up to 10 attempts) and without any mkdir or existence check: the
coordinator created the directories beforehand, and per-stream HEAD requests are what
object stores throttle first. File systems that cannot create atomically are refused
(``sparkpoint.fs.atomic``): a loser of a create race gets an error and never deletes the
winner's file.
"""

from __future__ import annotations

import logging
import uuid
from typing import BinaryIO, ClassVar

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    RelativeFileStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.state_digest import new_hasher
from sparkpoint.checkpoint.streams import (
    CheckpointedStateScope,
    CheckpointStateOutputStream,
    CheckpointStreamFactory,
)
from sparkpoint.config import CheckpointingOptions
from sparkpoint.errors import StorageError
from sparkpoint.fs.atomic import require_atomic_create
from sparkpoint.fs.base import FileSystem
from sparkpoint.fs.entropy import create_entropy_aware, is_entropy_injecting

__all__ = [
    "MAX_FILE_STATE_THRESHOLD",
    "FsCheckpointStateOutputStream",
    "FsCheckpointStreamFactory",
]

_LOG = logging.getLogger(__name__)

MAX_FILE_STATE_THRESHOLD = 1024 * 1024
"""Largest state that may be stored inline in the metadata (1 MiB)."""

_CREATE_ATTEMPTS = 10


class FsCheckpointStateOutputStream(CheckpointStateOutputStream):
    """Buffers up to ``buffer_size`` bytes; spills to a UUID-named file only when needed.

    Writes up to the buffer size are copied into it; larger writes flush the buffer and
    go straight to the file. (Flink sends a write of exactly the buffer size to the file;
    buffering it keeps "state at or below the threshold is inline" true for every write
    pattern.) Not thread-safe.
    """

    def __init__(
        self,
        base_path: str,
        fs: FileSystem,
        buffer_size: int,
        local_state_threshold: int,
        allow_relative_paths: bool = False,
    ) -> None:
        if buffer_size < local_state_threshold:
            raise ValueError(
                f"The buffer size ({buffer_size}) must not be smaller than the "
                f"inline threshold ({local_state_threshold})"
            )
        self._base_path = base_path
        self._fs = fs
        self._buffer = bytearray(buffer_size)
        self._view = memoryview(self._buffer)
        self._pos = 0
        self._threshold = local_state_threshold
        self._allow_relative = allow_relative_paths
        self._out: BinaryIO | None = None
        self._file_bytes = 0
        self._hasher = new_hasher()  # of every byte that goes to the file
        self._state_path: str | None = None
        self._relative_path: str | None = None
        self._closed = False

    # ---- writing --------------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._closed:
            raise StorageError("The stream is closed.")
        if isinstance(data, memoryview) and (data.ndim != 1 or data.itemsize != 1):
            data = data.cast("B")
        n = len(data)
        capacity = len(self._buffer)
        if n <= capacity:
            remaining = capacity - self._pos
            offset = 0
            if n > remaining:
                self._view[self._pos : capacity] = memoryview(data)[:remaining]
                self._pos = capacity
                offset = remaining
                self._flush_to_file()
            end = self._pos + n - offset
            self._view[self._pos : end] = memoryview(data)[offset:] if offset else data
            self._pos = end
        else:
            self._flush_to_file()
            out = self._out
            assert out is not None
            out.write(data)
            self._hasher.update(data)
            self._file_bytes += n
        return n

    def tell(self) -> int:
        return self._pos + self._file_bytes

    def flush(self) -> None:
        """Write buffered bytes to the file, but only once a file exists or must exist."""
        if self._out is not None or self._pos > self._threshold:
            self._flush_to_file()
            assert self._out is not None
            self._out.flush()

    def _flush_to_file(self) -> None:
        if self._closed:
            raise StorageError("closed")
        if self._out is None:
            self._create_stream()
        if self._pos > 0:
            assert self._out is not None
            chunk = self._view[: self._pos]
            self._out.write(chunk)
            self._hasher.update(chunk)
            self._file_bytes += self._pos
            self._pos = 0

    def _create_state_path(self) -> str:
        name = str(uuid.uuid4())
        self._relative_path = name
        return self._fs.join(self._base_path, name)

    def _create_stream(self) -> None:
        latest: Exception | None = None
        for _ in range(_CREATE_ATTEMPTS):
            try:
                self._out, self._state_path = create_entropy_aware(
                    self._fs, self._create_state_path(), overwrite=False
                )
                return
            except Exception as exc:
                latest = exc
        raise StorageError("Could not open output stream for state backend") from latest

    # ---- closing --------------------------------------------------------------------

    def close_and_get_handle(self) -> StreamStateHandle | None:
        if self._closed:
            raise StorageError("Stream has already been closed and discarded.")
        if self._out is None and self._pos == 0:
            self._closed = True
            return None
        if self._out is None and self._pos <= self._threshold:
            self._closed = True
            data = bytes(self._view[: self._pos])
            self._pos = 0
            return ByteStreamStateHandle(self._create_state_path(), data)
        try:
            self._flush_to_file()
            out = self._out
            assert out is not None and self._state_path is not None
            size = self._file_bytes
            out.close()
            digest = self._hasher.digest()
            if self._allow_relative:
                return RelativeFileStateHandle(
                    self._state_path, size, self._relative_path or "", digest=digest
                )
            return FileStateHandle(self._state_path, size, digest=digest)
        except FileExistsError as exc:
            # Another attempt published this path first: the file is theirs, keep it.
            raise StorageError(
                f"Could not publish the state file {self._state_path}: another writer "
                "created it first"
            ) from exc
        except Exception as exc:
            self._discard_state_file()
            raise StorageError(
                f"Could not flush to file and close the file system output stream to "
                f"{self._state_path} in order to obtain the stream state handle"
            ) from exc
        finally:
            self._closed = True
            self._pos = 0

    def close(self) -> None:
        """Abort: drop the file (if any) so nothing this stream wrote stays; failures are logged."""
        if self._closed:
            return
        self._closed = True
        self._pos = 0
        if self._out is not None:
            self._discard_state_file()

    def _discard_state_file(self) -> None:
        out, path = self._out, self._state_path
        if out is None or path is None:
            return
        try:
            self._fs.discard_output(out, path)
        except Exception:
            _LOG.warning(
                "Cannot discard the closed and discarded state stream for %s.", path, exc_info=True
            )

    @property
    def closed(self) -> bool:
        return self._closed


_Stream = FsCheckpointStateOutputStream


class FsCheckpointStreamFactory(CheckpointStreamFactory):
    """Creates file-backed checkpoint streams for one checkpoint directory.

    EXCLUSIVE state goes to ``checkpoint_directory`` and is recorded relative to it (so
    savepoints relocate); SHARED state goes to ``shared_state_directory`` and, like all
    state when entropy is injected, is recorded by absolute path.
    """

    MAX_FILE_STATE_THRESHOLD = MAX_FILE_STATE_THRESHOLD
    """Maximum size of state that is stored with the metadata, rather than in files."""
    FsCheckpointStateOutputStream: ClassVar[type[_Stream]] = _Stream
    """The stream this factory creates (Flink's nested class)."""

    def __init__(
        self,
        fs: FileSystem,
        checkpoint_directory: str,
        shared_state_directory: str,
        file_state_size_threshold: int = CheckpointingOptions.FS_SMALL_FILE_THRESHOLD.default,
        write_buffer_size: int = CheckpointingOptions.FS_WRITE_BUFFER_SIZE.default,
    ) -> None:
        if file_state_size_threshold < 0:
            raise ValueError("The threshold for file state size must be zero or larger.")
        if write_buffer_size < 0:
            raise ValueError("The write buffer size must be zero or larger.")
        if file_state_size_threshold > MAX_FILE_STATE_THRESHOLD:
            raise ValueError(
                "The threshold for file state size cannot be larger than "
                f"{MAX_FILE_STATE_THRESHOLD}"
            )
        require_atomic_create(fs, checkpoint_directory)
        self.fs = fs
        self.checkpoint_directory = checkpoint_directory
        self.shared_state_directory = shared_state_directory
        self.file_state_threshold = file_state_size_threshold
        self.write_buffer_size = write_buffer_size
        self.entropy_injecting = is_entropy_injecting(fs, checkpoint_directory)

    def get_target_path(self, scope: CheckpointedStateScope) -> str:
        """The directory streams of ``scope`` write into."""
        if scope is CheckpointedStateScope.EXCLUSIVE:
            return self.checkpoint_directory
        return self.shared_state_directory

    def create_checkpoint_state_output_stream(
        self, scope: CheckpointedStateScope = CheckpointedStateScope.EXCLUSIVE
    ) -> _Stream:
        buffer_size = max(self.write_buffer_size, self.file_state_threshold)
        absolute = self.entropy_injecting or scope is CheckpointedStateScope.SHARED
        return _Stream(
            self.get_target_path(scope),
            self.fs,
            buffer_size,
            self.file_state_threshold,
            not absolute,
        )

    def __repr__(self) -> str:
        return f"File Stream Factory @ {self.checkpoint_directory}"
