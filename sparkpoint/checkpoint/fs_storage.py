"""Per-job file-system checkpoint storage access and its savepoint handling.

Layout (Flink's): ``<dir>/<job-id>/{shared,taskowned,chk-N/_metadata}``. The coordinator
creates ``shared/`` and ``taskowned/`` once and ``chk-N/`` per checkpoint; tasks never
create directories. Savepoints are self-contained directories
``savepoint-<first 6 of job id>-<12 random chars>`` holding all of their state.
"""

from __future__ import annotations

import abc
import random

from sparkpoint.checkpoint.fs_location import (
    FsCheckpointStorageLocation,
    resolve_checkpoint_pointer,
)
from sparkpoint.checkpoint.fs_streams import (
    MAX_FILE_STATE_THRESHOLD,
    FsCheckpointStateOutputStream,
)
from sparkpoint.checkpoint.storage import (
    CheckpointStorageAccess,
    CheckpointStorageLocation,
    CheckpointStorageLocationReference,
    CompletedCheckpointStorageLocation,
)
from sparkpoint.config import CheckpointingOptions
from sparkpoint.errors import StorageError
from sparkpoint.fs import get_filesystem
from sparkpoint.fs.atomic import require_atomic_create
from sparkpoint.fs.base import FileSystem

__all__ = [
    "CHECKPOINT_DIR_PREFIX",
    "CHECKPOINT_SHARED_STATE_DIR",
    "CHECKPOINT_TASK_OWNED_STATE_DIR",
    "AbstractFsCheckpointStorageAccess",
    "FsCheckpointStorageAccess",
    "random_filename",
]

CHECKPOINT_DIR_PREFIX = "chk-"
CHECKPOINT_SHARED_STATE_DIR = "shared"
CHECKPOINT_TASK_OWNED_STATE_DIR = "taskowned"

_SAVEPOINT_ATTEMPTS = 10
# Flink's FileUtils alphabet, including its duplicate '0'.
_RANDOM_ALPHABET = "01234567890abcdef"
_RANDOM_LENGTH = 12
_random = random.SystemRandom()


def random_filename(prefix: str) -> str:
    """``prefix`` plus 12 random characters from Flink's alphabet (``0-9, 0, a-f``)."""
    return prefix + "".join(_random.choice(_RANDOM_ALPHABET) for _ in range(_RANDOM_LENGTH))


def _check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not job_id or "/" in job_id:
        raise ValueError(f"job_id must be a non-empty str without '/', got {job_id!r}")
    return job_id


class AbstractFsCheckpointStorageAccess(CheckpointStorageAccess):
    """What file-based and memory storage share: savepoints and pointer resolution."""

    def __init__(self, job_id: str, default_savepoint_directory: str | None) -> None:
        self.job_id = _check_job_id(job_id)
        self.default_savepoint_directory = default_savepoint_directory

    def has_default_savepoint_location(self) -> bool:
        return self.default_savepoint_directory is not None

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)

    def initialize_location_for_savepoint(
        self, checkpoint_id: int, target_location: str | None
    ) -> CheckpointStorageLocation:
        if target_location is not None:
            if not isinstance(target_location, str) or not target_location.strip("/"):
                raise ValueError(
                    f"Savepoint target must be a non-empty path or URI, got {target_location!r}"
                )
            base = target_location.rstrip("/")
        elif self.default_savepoint_directory is not None:
            base = self.default_savepoint_directory
        else:
            raise ValueError("No savepoint location given and no default location configured.")
        fs = get_filesystem(base)
        prefix = f"savepoint-{self.job_id[:6]}-"
        latest: Exception | None = None
        for _ in range(_SAVEPOINT_ATTEMPTS):
            path = fs.join(base, random_filename(prefix))
            try:
                if not fs.exists(path):
                    fs.mkdirs(path)
                    return self._create_savepoint_location(fs, path)
            except OSError as exc:
                latest = exc
        raise StorageError(f"Failed to create savepoint directory at {base}") from latest

    @abc.abstractmethod
    def _create_savepoint_location(
        self, fs: FileSystem, location: str
    ) -> CheckpointStorageLocation:
        """The storage location of a savepoint in the fresh directory ``location``."""

    @staticmethod
    def get_checkpoint_directory_for_job(base: str, job_id: str) -> str:
        """``<base>/<job-id>``."""
        return f"{base.rstrip('/')}/{job_id}"

    @staticmethod
    def create_checkpoint_directory(base: str, checkpoint_id: int) -> str:
        """``<base>/chk-<N>``."""
        return f"{base.rstrip('/')}/{CHECKPOINT_DIR_PREFIX}{checkpoint_id}"


def _check_checkpoint_id(checkpoint_id: int) -> None:
    if checkpoint_id < 0:
        raise ValueError(f"Illegal negative checkpoint id: {checkpoint_id}.")


class FsCheckpointStorageAccess(AbstractFsCheckpointStorageAccess):
    """Checkpoints and savepoints as files; small state inline in ``_metadata``."""

    def __init__(
        self,
        checkpoint_base_directory: str,
        default_savepoint_directory: str | None,
        job_id: str,
        file_size_threshold: int = CheckpointingOptions.FS_SMALL_FILE_THRESHOLD.default,
        write_buffer_size: int = CheckpointingOptions.FS_WRITE_BUFFER_SIZE.default,
        create_checkpoint_sub_dir: bool = True,
        fs: FileSystem | None = None,
    ) -> None:
        super().__init__(job_id, default_savepoint_directory)
        if not 0 <= file_size_threshold <= MAX_FILE_STATE_THRESHOLD:
            raise ValueError(
                f"file_size_threshold must be in [0, {MAX_FILE_STATE_THRESHOLD}], "
                f"got {file_size_threshold}"
            )
        if write_buffer_size < 0:
            raise ValueError(f"write_buffer_size must be >= 0, got {write_buffer_size}")
        base = checkpoint_base_directory.rstrip("/")
        self.fs = fs if fs is not None else get_filesystem(base)
        require_atomic_create(self.fs, base)
        self.checkpoints_directory = (
            self.get_checkpoint_directory_for_job(base, job_id)
            if create_checkpoint_sub_dir
            else base
        )
        self.shared_state_directory = self.fs.join(
            self.checkpoints_directory, CHECKPOINT_SHARED_STATE_DIR
        )
        self.task_owned_state_directory = self.fs.join(
            self.checkpoints_directory, CHECKPOINT_TASK_OWNED_STATE_DIR
        )
        self.file_size_threshold = file_size_threshold
        self.write_buffer_size = write_buffer_size

    # ---- coordinator view -------------------------------------------------------------

    def initialize_base_locations_for_checkpoint(self) -> None:
        for what, path in (
            ("shared state", self.shared_state_directory),
            ("task owned state", self.task_owned_state_directory),
        ):
            try:
                self.fs.mkdirs(path)
            except OSError as exc:
                raise StorageError(f"Failed to create directory for {what}: {path}") from exc

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> FsCheckpointStorageLocation:
        _check_checkpoint_id(checkpoint_id)
        checkpoint_dir = self.create_checkpoint_directory(self.checkpoints_directory, checkpoint_id)
        self.fs.mkdirs(checkpoint_dir)
        return self._location(
            self.fs, checkpoint_dir, CheckpointStorageLocationReference.DEFAULT, shared=True
        )

    def _create_savepoint_location(
        self, fs: FileSystem, location: str
    ) -> FsCheckpointStorageLocation:
        reference = CheckpointStorageLocationReference.for_path(location)
        return self._location(fs, location, reference, shared=False)

    def _location(
        self,
        fs: FileSystem,
        directory: str,
        reference: CheckpointStorageLocationReference,
        *,
        shared: bool,
    ) -> FsCheckpointStorageLocation:
        return FsCheckpointStorageLocation(
            fs,
            directory,
            self.shared_state_directory if shared else directory,
            self.task_owned_state_directory if shared else directory,
            reference,
            self.file_size_threshold,
            self.write_buffer_size,
        )

    # ---- worker view ------------------------------------------------------------------

    def resolve_checkpoint_storage_location(
        self, checkpoint_id: int, reference: CheckpointStorageLocationReference
    ) -> FsCheckpointStorageLocation:
        if reference.is_default_reference():
            directory = self.create_checkpoint_directory(self.checkpoints_directory, checkpoint_id)
            return self._location(self.fs, directory, reference, shared=True)
        path = reference.to_path()
        return self._location(get_filesystem(path), path, reference, shared=False)

    def create_task_owned_state_stream(self) -> FsCheckpointStateOutputStream:
        return FsCheckpointStateOutputStream(
            self.task_owned_state_directory,
            self.fs,
            max(self.write_buffer_size, self.file_size_threshold),
            self.file_size_threshold,
        )

    def __repr__(self) -> str:
        return (
            f"FsCheckpointStorageAccess(checkpointsDirectory={self.checkpoints_directory}, "
            f"defaultSavepointDirectory={self.default_savepoint_directory}, "
            f"fileSizeThreshold={self.file_size_threshold}, "
            f"writeBufferSize={self.write_buffer_size})"
        )
