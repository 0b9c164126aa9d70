"""Checkpoint storage roles: the picklable configuration, the per-job access and locations.

``CheckpointStorage`` holds configuration only and creates a ``CheckpointStorageAccess`` per
job. The access has a coordinator view (initialise checkpoint/savepoint locations, resolve
pointers) and a worker view (stream factories for a location reference). A
``CheckpointStorageLocation`` is where one checkpoint's state and ``_metadata`` go; finishing
its metadata stream yields a ``CompletedCheckpointStorageLocation``.
"""

from __future__ import annotations

import abc
import io
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar

from sparkpoint.checkpoint.handles import FileStateHandle, StreamStateHandle
from sparkpoint.checkpoint.streams import CheckpointStateOutputStream, CheckpointStreamFactory
from sparkpoint.errors import StorageError

__all__ = [
    "MAX_METADATA_SIZE",
    "METADATA_FILE_NAME",
    "BufferedMetadataOutputStream",
    "CheckpointMetadataOutputStream",
    "CheckpointStorage",
    "CheckpointStorageAccess",
    "CheckpointStorageLocation",
    "CheckpointStorageLocationReference",
    "CompletedCheckpointStorageLocation",
    "read_metadata_bytes",
    "read_metadata_file",
    "write_metadata_bytes",
]

METADATA_FILE_NAME = "_metadata"
"""Name of the metadata file inside a checkpoint or savepoint directory."""

MAX_METADATA_SIZE = 128 * 1024 * 1024
"""The largest ``_metadata`` (bytes) sparkpoint writes or reads: 128 MiB. A snapshot is
input from outside, and a larger file would be read whole into memory before its checksum
can refuse it; a job's own ``_metadata`` holds handles and small inline state, far less."""

_METADATA_WHAT = f"a checkpoint {METADATA_FILE_NAME}"

_REFERENCE_MAGIC = bytes([0x05, 0x5F, 0x3F, 0x18])


@dataclass(frozen=True, slots=True)
class CheckpointStorageLocationReference:
    """Tells workers where to write a checkpoint; ``None`` bytes is the default reference.

    The default reference means "the standard location of the checkpoint id" (``chk-N``);
    any other reference is the magic ``05 5F 3F 18`` followed by the UTF-8 path.
    """

    reference_bytes: bytes | None = None

    DEFAULT: ClassVar[CheckpointStorageLocationReference]

    def __post_init__(self) -> None:
        if self.reference_bytes is not None and len(self.reference_bytes) == 0:
            raise ValueError("A location reference must not be empty (use the default)")

    def is_default_reference(self) -> bool:
        """Whether this is the default reference (no explicit location)."""
        return self.reference_bytes is None

    def get_reference_bytes(self) -> bytes:
        """The encoded reference (empty for the default reference, as Flink's)."""
        return b"" if self.reference_bytes is None else self.reference_bytes

    @classmethod
    def get_default(cls) -> CheckpointStorageLocationReference:
        """The default reference singleton."""
        return cls.DEFAULT

    @classmethod
    def for_path(cls, path: str) -> CheckpointStorageLocationReference:
        """Encode ``path`` as a reference (Flink's ``encodePathAsReference``)."""
        return cls(_REFERENCE_MAGIC + path.encode("utf-8"))

    def to_path(self) -> str:
        """Decode the path of a non-default reference (Flink's ``decodePathFromReference``)."""
        data = self.reference_bytes
        if data is None:
            raise ValueError("Cannot decode a path from the default reference")
        if len(data) <= len(_REFERENCE_MAGIC) or not data.startswith(_REFERENCE_MAGIC):
            raise ValueError("Reference starts with the wrong magic number")
        try:
            return data[len(_REFERENCE_MAGIC) :].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError("Reference path is not valid UTF-8") from exc


CheckpointStorageLocationReference.DEFAULT = CheckpointStorageLocationReference(None)


@dataclass(frozen=True, slots=True)
class CompletedCheckpointStorageLocation:
    """Where a completed checkpoint lives: its pointer, metadata handle and exclusive dir.

    ``external_pointer`` is the checkpoint (or savepoint) directory, to be passed back to
    ``resolve_checkpoint``. ``exclusive_dir`` is ``None`` when nothing is on a filesystem.
    """

    external_pointer: str
    metadata_handle: StreamStateHandle
    exclusive_dir: str | None = None

    def dispose_storage_location(self) -> None:
        """Delete the checkpoint directory and everything in it (nothing if not on a fs)."""
        if self.exclusive_dir is None:
            return
        from sparkpoint.fs import get_filesystem

        get_filesystem(self.exclusive_dir).delete(self.exclusive_dir, recursive=True)


class CheckpointMetadataOutputStream(abc.ABC):
    """The stream ``_metadata`` is written through; it becomes visible only when finalised.

    ``close_and_finalize_checkpoint()`` publishes the metadata atomically and returns the
    completed location; ``close()`` (or leaving a ``with`` block) aborts and leaves nothing.
    """

    @abc.abstractmethod
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data``; returns the number of bytes written."""

    @abc.abstractmethod
    def tell(self) -> int:
        """Bytes written so far."""

    def get_pos(self) -> int:
        """Flink's name for ``tell``."""
        return self.tell()

    def flush(self) -> None:  # noqa: B027 - deliberately a no-op by default
        """Nothing is visible before finalisation, so flushing has no effect."""

    @abc.abstractmethod
    def close_and_finalize_checkpoint(self) -> CompletedCheckpointStorageLocation:
        """Publish the metadata and return where the completed checkpoint lives."""

    @abc.abstractmethod
    def close(self) -> None:
        """Abort: discard what was written. Idempotent."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """Whether the stream has been closed (either way)."""

    def __enter__(self) -> CheckpointMetadataOutputStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class BufferedMetadataOutputStream(CheckpointMetadataOutputStream):
    """A metadata stream that collects the bytes and publishes them in one step when
    finalised (``_publish``): nothing is visible before, and aborting drops the buffer."""

    def __init__(self) -> None:
        self._buffer: io.BytesIO | None = io.BytesIO()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._buffer is None:
            raise StorageError("The metadata stream is closed.")
        return self._buffer.write(data)

    def tell(self) -> int:
        return 0 if self._buffer is None else self._buffer.tell()

    def close_and_finalize_checkpoint(self) -> CompletedCheckpointStorageLocation:
        if self._buffer is None:
            raise StorageError("Stream has already been closed and discarded.")
        data = self._buffer.getvalue()
        self._buffer = None
        return self._publish(data)

    @abc.abstractmethod
    def _publish(self, data: bytes) -> CompletedCheckpointStorageLocation:
        """Make ``data`` the checkpoint's ``_metadata``; returns the completed location."""

    def close(self) -> None:
        """Abort: nothing was published, so dropping the buffer is all there is to do."""
        self._buffer = None

    @property
    def closed(self) -> bool:
        return self._buffer is None


class CheckpointStorageLocation(CheckpointStreamFactory):
    """The location of one checkpoint: a stream factory plus its metadata stream."""

    @abc.abstractmethod
    def create_metadata_output_stream(self) -> CheckpointMetadataOutputStream:
        """A stream for this checkpoint's ``_metadata``."""

    @abc.abstractmethod
    def dispose_on_failure(self) -> None:
        """Delete everything written for this (failed or aborted) checkpoint."""

    @abc.abstractmethod
    def get_location_reference(self) -> CheckpointStorageLocationReference:
        """The reference workers use to find this location."""

    @property
    @abc.abstractmethod
    def exclusive_dir(self) -> str | None:
        """The directory of this checkpoint's exclusive state (``None`` in memory)."""


class CheckpointStorageAccess(abc.ABC):
    """Per-job storage access: coordinator view and worker view in one object."""

    # ---- coordinator view -------------------------------------------------------------

    @abc.abstractmethod
    def has_default_savepoint_location(self) -> bool:
        """Whether a default savepoint directory is configured."""

    @abc.abstractmethod
    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """Find the completed checkpoint a pointer (directory or ``_metadata`` file) names."""

    def supports_highly_available_storage(self) -> bool:
        """Whether checkpoints survive the loss of the driver (persisted, not in memory)."""
        return True

    @abc.abstractmethod
    def initialize_base_locations_for_checkpoint(self) -> None:
        """Create the job's base directories (``shared/``, ``taskowned/``) once."""

    @abc.abstractmethod
    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> CheckpointStorageLocation:
        """Create the location of checkpoint ``checkpoint_id`` (``chk-N``)."""

    @abc.abstractmethod
    def initialize_location_for_savepoint(
        self, checkpoint_id: int, target_location: str | None
    ) -> CheckpointStorageLocation:
        """Create a self-contained savepoint directory under ``target_location`` (or the
        default savepoint directory)."""

    # ---- worker view ------------------------------------------------------------------

    @abc.abstractmethod
    def resolve_checkpoint_storage_location(
        self, checkpoint_id: int, reference: CheckpointStorageLocationReference
    ) -> CheckpointStreamFactory:
        """The stream factory a task writes checkpoint ``checkpoint_id`` state through."""

    @abc.abstractmethod
    def create_task_owned_state_stream(self) -> CheckpointStateOutputStream:
        """A stream for state the task owns (never deleted by the coordinator)."""


class CheckpointStorage(abc.ABC):
    """How state is checkpointed: configuration only, picklable, shipped to every process.

    Implementations act as factories: ``create_checkpoint_storage(job_id)`` builds the
    per-job access. ``configure`` fills values left unset from Flink configuration keys.
    Implementations must be thread-safe (streams may be created concurrently).
    """

    @abc.abstractmethod
    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """Find the completed checkpoint or savepoint that ``pointer`` names."""

    @abc.abstractmethod
    def create_checkpoint_storage(self, job_id: str) -> CheckpointStorageAccess:
        """The storage access for job ``job_id``."""

    def configure(self, config: Mapping[str, str]) -> CheckpointStorage:
        """A storage with unset values taken from ``config`` (itself when nothing to fill)."""
        return self


def read_metadata_file(path: str) -> bytes:
    """The bytes of the ``_metadata`` file at ``path``: refused (``StorageError`` naming the
    file) unless it is a regular file of at most ``MAX_METADATA_SIZE`` bytes."""
    from sparkpoint.fs import get_filesystem

    return get_filesystem(path).read_regular_file(path, MAX_METADATA_SIZE, _METADATA_WHAT)


def read_metadata_bytes(handle: StreamStateHandle, source: str | None = None) -> bytes:
    """The bytes of a completed location's ``metadata_handle`` (``read_metadata_file`` for
    a file; ``source`` names an in-memory one in the error when it is too large)."""
    if isinstance(handle, FileStateHandle):
        return read_metadata_file(handle.path)
    data = handle.read_all()
    if len(data) > MAX_METADATA_SIZE:
        from sparkpoint.fs.base import too_large

        name = source or type(handle).__name__
        raise StorageError(too_large(name, _METADATA_WHAT, len(data), MAX_METADATA_SIZE))
    return data


def write_metadata_bytes(
    location: CheckpointStorageLocation, data: bytes
) -> CompletedCheckpointStorageLocation:
    """Write ``data`` as the location's ``_metadata`` and finalise it in one step; one
    larger than ``MAX_METADATA_SIZE`` is refused (``StorageError``), as it could not be
    read back."""
    if len(data) > MAX_METADATA_SIZE:
        raise StorageError(
            f"Refusing to write a {METADATA_FILE_NAME} of {len(data)} bytes: more than the "
            f"{MAX_METADATA_SIZE} bytes ({MAX_METADATA_SIZE // 1024**2} MiB) sparkpoint reads "
            "back; lower the inline state threshold (state.storage.fs.memory-threshold) or "
            "the number of operator state partitions"
        )
    with location.create_metadata_output_stream() as out:
        out.write(data)
        return out.close_and_finalize_checkpoint()
