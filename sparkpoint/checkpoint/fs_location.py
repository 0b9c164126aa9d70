"""File-system checkpoint locations: ``chk-N`` or savepoint directories and ``_metadata``.

The metadata stream collects the bytes and publishes them in one atomic step when the
checkpoint is finalised (rename into place locally, one PUT on object stores), so a
reader never sees a partial ``_metadata`` and an existing one is never replaced.
"""

from __future__ import annotations

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import FileStateHandle
from sparkpoint.checkpoint.storage import (
    METADATA_FILE_NAME,
    BufferedMetadataOutputStream,
    CheckpointStorageLocation,
    CheckpointStorageLocationReference,
    CompletedCheckpointStorageLocation,
)
from sparkpoint.errors import StorageError
from sparkpoint.fs import get_filesystem
from sparkpoint.fs.atomic import require_atomic_create
from sparkpoint.fs.base import FileSystem
from sparkpoint.fs.entropy import remove_entropy_marker_if_present

__all__ = [
    "FsCheckpointMetadataOutputStream",
    "FsCheckpointStorageLocation",
    "resolve_checkpoint_pointer",
]


class FsCheckpointMetadataOutputStream(BufferedMetadataOutputStream):
    """Writes ``_metadata`` into ``exclusive_dir``; visible only after finalisation."""

    def __init__(self, fs: FileSystem, metadata_file_path: str, exclusive_dir: str) -> None:
        require_atomic_create(fs, metadata_file_path)
        if fs.exists(metadata_file_path):
            raise StorageError(f"Target file {metadata_file_path} already exists.")
        super().__init__()
        self._fs = fs
        self._metadata_file_path = metadata_file_path
        self._exclusive_dir = exclusive_dir

    def _publish(self, data: bytes) -> CompletedCheckpointStorageLocation:
        try:
            self._fs.write_atomic(self._metadata_file_path, data, overwrite=False)
        except FileExistsError as exc:
            raise StorageError(f"Target file {self._metadata_file_path} already exists.") from exc
        except OSError as exc:
            raise StorageError(
                f"Could not write the checkpoint metadata to {self._metadata_file_path}"
            ) from exc
        handle = FileStateHandle(self._metadata_file_path, len(data))
        return CompletedCheckpointStorageLocation(self._exclusive_dir, handle, self._exclusive_dir)


class FsCheckpointStorageLocation(FsCheckpointStreamFactory, CheckpointStorageLocation):
    """A checkpoint's directory (also a stream factory for its exclusive and shared state).

    The metadata always lands in the directory with the entropy marker removed.
    """

    def __init__(
        self,
        fs: FileSystem,
        checkpoint_dir: str,
        shared_state_dir: str,
        task_owned_state_dir: str,
        reference: CheckpointStorageLocationReference,
        file_state_size_threshold: int,
        write_buffer_size: int,
    ) -> None:
        super().__init__(
            fs, checkpoint_dir, shared_state_dir, file_state_size_threshold, write_buffer_size
        )
        self.task_owned_state_directory = task_owned_state_dir
        self._reference = reference
        self._metadata_dir = remove_entropy_marker_if_present(fs, checkpoint_dir)
        self.metadata_file_path = fs.join(self._metadata_dir, METADATA_FILE_NAME)

    @property
    def exclusive_dir(self) -> str:
        return self._metadata_dir

    def create_metadata_output_stream(self) -> FsCheckpointMetadataOutputStream:
        return FsCheckpointMetadataOutputStream(
            self.fs, self.metadata_file_path, self._metadata_dir
        )

    def dispose_on_failure(self) -> None:
        """Nothing in a failed checkpoint's directory is kept: delete it as a whole."""
        self.fs.delete(self._metadata_dir, recursive=True)

    def get_location_reference(self) -> CheckpointStorageLocationReference:
        return self._reference

    def __repr__(self) -> str:
        return (
            f"FsCheckpointStorageLocation {{fileSystem={self.fs!r}, "
            f"checkpointDirectory={self.checkpoint_directory}, "
            f"sharedStateDirectory={self.shared_state_directory}, "
            f"taskOwnedStateDirectory={self.task_owned_state_directory}, "
            f"metadataFilePath={self.metadata_file_path}, "
            f"reference={self._reference}, "
            f"fileStateSizeThreshold={self.file_state_threshold}, "
            f"writeBufferSize={self.write_buffer_size}}}"
        )


def resolve_checkpoint_pointer(pointer: str) -> CompletedCheckpointStorageLocation:
    """Resolve a checkpoint/savepoint directory or its ``_metadata`` file (Flink's rules)."""
    if not isinstance(pointer, str):
        raise ValueError(f"checkpoint pointer must be a str, got {type(pointer).__name__}")
    if not pointer:
        raise ValueError("empty checkpoint pointer")
    try:
        fs = get_filesystem(pointer)
    except (ValueError, TypeError) as exc:
        raise StorageError(
            f"Checkpoint/savepoint path '{pointer}' is not a valid file URI. Either the pointer "
            "path is invalid, or the checkpoint was created by a different state backend."
        ) from exc
    path = pointer.rstrip("/") or pointer
    if fs.is_dir(path):
        checkpoint_dir = path
        metadata_path = fs.join(path, METADATA_FILE_NAME)
        if not fs.exists(metadata_path) or fs.is_dir(metadata_path):
            raise FileNotFoundError(
                f"Cannot find meta data file '{METADATA_FILE_NAME}' in directory '{path}'. "
                "Please try to load the checkpoint/savepoint directly from the metadata file "
                "instead of the directory."
            )
    elif fs.exists(path):
        metadata_path = path
        checkpoint_dir = fs.parent(path)
    else:
        raise FileNotFoundError(
            f"Cannot find checkpoint or savepoint file/directory '{pointer}' on file system "
            f"'{fs.scheme}'."
        )
    handle = FileStateHandle(metadata_path, fs.size(metadata_path))
    return CompletedCheckpointStorageLocation(checkpoint_dir, handle, checkpoint_dir)
