"""Per-job access of JobManagerCheckpointStorage: state inline, metadata in driver memory.

All state goes inline (capped per state). Without a checkpoint directory the metadata
stays in memory and the checkpoint is not externally addressable; with one, only
``_metadata`` is persisted to ``<dir>/<job-id>/chk-N/``. Savepoints always go to a
filesystem, also as a single ``_metadata`` file.
"""

from __future__ import annotations

import uuid

from sparkpoint.checkpoint.fs_location import FsCheckpointMetadataOutputStream
from sparkpoint.checkpoint.fs_storage import AbstractFsCheckpointStorageAccess
from sparkpoint.checkpoint.handles import ByteStreamStateHandle
from sparkpoint.checkpoint.mem_streams import (
    DEFAULT_MAX_STATE_SIZE,
    MemCheckpointStreamFactory,
    MemoryCheckpointOutputStream,
)
from sparkpoint.checkpoint.storage import (
    METADATA_FILE_NAME,
    BufferedMetadataOutputStream,
    CheckpointMetadataOutputStream,
    CheckpointStorageLocation,
    CheckpointStorageLocationReference,
    CompletedCheckpointStorageLocation,
)
from sparkpoint.fs import get_filesystem
from sparkpoint.fs.atomic import require_atomic_create
from sparkpoint.fs.base import FileSystem

__all__ = [
    "NOT_EXTERNALLY_ADDRESSABLE",
    "MemCheckpointStorageAccess",
    "NonPersistentMetadataCheckpointStorageLocation",
    "PersistentMetadataCheckpointStorageLocation",
]

NOT_EXTERNALLY_ADDRESSABLE = "<checkpoint-not-externally-addressable>"
"""The external pointer of a checkpoint whose metadata lives only in memory."""


class _MemoryMetadataOutputStream(BufferedMetadataOutputStream):
    """Collects ``_metadata`` in memory; the completed location holds the bytes inline."""

    def _publish(self, data: bytes) -> CompletedCheckpointStorageLocation:
        handle = ByteStreamStateHandle(str(uuid.uuid4()), data)
        return CompletedCheckpointStorageLocation(NOT_EXTERNALLY_ADDRESSABLE, handle, None)


class NonPersistentMetadataCheckpointStorageLocation(
    MemCheckpointStreamFactory, CheckpointStorageLocation
):
    """A checkpoint kept entirely in driver memory (tests, local development)."""

    @property
    def exclusive_dir(self) -> None:
        return None

    def create_metadata_output_stream(self) -> CheckpointMetadataOutputStream:
        return _MemoryMetadataOutputStream()

    def dispose_on_failure(self) -> None:
        """Nothing was written anywhere."""

    def get_location_reference(self) -> CheckpointStorageLocationReference:
        return CheckpointStorageLocationReference.DEFAULT


class PersistentMetadataCheckpointStorageLocation(
    MemCheckpointStreamFactory, CheckpointStorageLocation
):
    """A checkpoint (or savepoint) whose state is inline and whose ``_metadata`` is a file."""

    def __init__(self, fs: FileSystem, checkpoint_dir: str, max_state_size: int) -> None:
        super().__init__(max_state_size)
        self.fs = fs
        self.checkpoint_directory = checkpoint_dir
        self.metadata_file_path = fs.join(checkpoint_dir, METADATA_FILE_NAME)

    @property
    def exclusive_dir(self) -> str:
        return self.checkpoint_directory

    def create_metadata_output_stream(self) -> FsCheckpointMetadataOutputStream:
        return FsCheckpointMetadataOutputStream(
            self.fs, self.metadata_file_path, self.checkpoint_directory
        )

    def dispose_on_failure(self) -> None:
        """Nothing in the directory is kept: delete it as a whole."""
        self.fs.delete(self.checkpoint_directory, recursive=True)

    def get_location_reference(self) -> CheckpointStorageLocationReference:
        return CheckpointStorageLocationReference.DEFAULT


class MemCheckpointStorageAccess(AbstractFsCheckpointStorageAccess):
    """JobManagerCheckpointStorage for one job (Flink's MemoryBackendCheckpointStorageAccess)."""

    def __init__(
        self,
        job_id: str,
        checkpoints_base_directory: str | None,
        default_savepoint_location: str | None,
        max_state_size: int = DEFAULT_MAX_STATE_SIZE,
    ) -> None:
        super().__init__(job_id, default_savepoint_location)
        if max_state_size <= 0:
            raise ValueError(f"max_state_size must be > 0, got {max_state_size}")
        self.max_state_size = max_state_size
        self.fs: FileSystem | None = None
        self.checkpoints_directory: str | None = None
        if checkpoints_base_directory is not None:
            base = checkpoints_base_directory.rstrip("/")
            self.fs = get_filesystem(base)
            require_atomic_create(self.fs, base)
            self.checkpoints_directory = self.get_checkpoint_directory_for_job(base, job_id)
            self.fs.mkdirs(self.checkpoints_directory)

    def supports_highly_available_storage(self) -> bool:
        return self.checkpoints_directory is not None

    def initialize_base_locations_for_checkpoint(self) -> None:
        """Nothing to create: state is inline and no shared directory exists."""

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> CheckpointStorageLocation:
        if checkpoint_id < 0:
            raise ValueError(f"Illegal negative checkpoint id: {checkpoint_id}.")
        if self.fs is None or self.checkpoints_directory is None:
            return NonPersistentMetadataCheckpointStorageLocation(self.max_state_size)
        checkpoint_dir = self.create_checkpoint_directory(self.checkpoints_directory, checkpoint_id)
        self.fs.mkdirs(checkpoint_dir)
        return PersistentMetadataCheckpointStorageLocation(
            self.fs, checkpoint_dir, self.max_state_size
        )

    def _create_savepoint_location(
        self, fs: FileSystem, location: str
    ) -> PersistentMetadataCheckpointStorageLocation:
        return PersistentMetadataCheckpointStorageLocation(fs, location, self.max_state_size)

    def resolve_checkpoint_storage_location(
        self, checkpoint_id: int, reference: CheckpointStorageLocationReference
    ) -> MemCheckpointStreamFactory:
        return MemCheckpointStreamFactory(self.max_state_size)

    def create_task_owned_state_stream(self) -> MemoryCheckpointOutputStream:
        return MemoryCheckpointOutputStream(self.max_state_size)

    def __repr__(self) -> str:
        return (
            f"MemoryBackendCheckpointStorage {{checkpointsDirectory={self.checkpoints_directory}, "
            f"fileSystem={self.fs!r}, maxStateSize={self.max_state_size}}}"
        )
