"""The checkpoint storage policies users choose: JobManager memory or a file system.

Each policy holds configuration only (it is pickled and shipped to every process) and
creates the per-job access. ``configure(config)`` returns a copy whose unset values are
filled from Flink's configuration keys, the application's settings taking precedence.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from typing import Any

from sparkpoint.checkpoint.fs_location import resolve_checkpoint_pointer
from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.fs_streams import MAX_FILE_STATE_THRESHOLD
from sparkpoint.checkpoint.mem_storage import MemCheckpointStorageAccess
from sparkpoint.checkpoint.mem_streams import DEFAULT_MAX_STATE_SIZE
from sparkpoint.checkpoint.storage import (
    CheckpointStorage,
    CheckpointStorageAccess,
    CompletedCheckpointStorageLocation,
)
from sparkpoint.config import CheckpointingOptions, invalid_value
from sparkpoint.fs.registry import is_known_scheme, split_scheme

__all__ = [
    "FileSystemCheckpointStorage",
    "JobManagerCheckpointStorage",
    "check_scheme",
    "validate_path",
]

_LOG = logging.getLogger(__name__)


def _int_arg(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    return value


_OPTS = CheckpointingOptions
_DEFAULT_THRESHOLD = _OPTS.FS_SMALL_FILE_THRESHOLD.default
_DEFAULT_WRITE_BUFFER = _OPTS.FS_WRITE_BUFFER_SIZE.default


def check_scheme(path: str, what: str) -> str:
    """``path`` if a filesystem serves its scheme; else an error naming ``what`` and the path."""
    try:
        scheme, _ = split_scheme(path)
    except ValueError:
        raise invalid_value(what, path, "a path or a URI with a valid scheme") from None
    if not is_known_scheme(scheme):
        raise invalid_value(
            what,
            path,
            f"a path or URI of a known filesystem; scheme {scheme!r} is unknown "
            "(file://, s3://, gs://, hdfs://, memory:// and other fsspec schemes are known)",
        )
    return path


def validate_path(value: object, what: str) -> str:
    """A checkpoint or savepoint base path: a non-empty str (or path-like) of a known
    filesystem, not a root."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a str path or URI, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    check_scheme(value, what)
    scheme, sep, rest = value.partition("://")
    if not sep or scheme == "memory":
        path_part = rest if sep else value
    else:
        path_part = "/" + rest.partition("/")[2]
    if not path_part.strip("/"):
        raise ValueError(f"Cannot use the root directory for checkpoints ({what}={value!r}).")
    return value.rstrip("/")


def _optional_path(value: object, what: str) -> str | None:
    return None if value is None else validate_path(value, what)


class JobManagerCheckpointStorage(CheckpointStorage):
    """Checkpoints in the driver's memory (savepoints to a file system); small state only.

    Each state is capped at ``max_state_size`` (default 5 MiB). With ``checkpoint_path``,
    the ``_metadata`` of each checkpoint is also persisted there.
    """

    DEFAULT_MAX_STATE_SIZE = DEFAULT_MAX_STATE_SIZE

    def __init__(
        self,
        checkpoint_path: str | os.PathLike[str] | None = None,
        max_state_size: int | None = None,
    ) -> None:
        size = (
            DEFAULT_MAX_STATE_SIZE
            if max_state_size is None
            else _int_arg(max_state_size, "max_state_size")
        )
        if size <= 0:
            raise ValueError(f"max_state_size must be > 0, got {size}")
        self._checkpoint_path = _optional_path(checkpoint_path, "checkpoint_path")
        self._savepoint_path: str | None = None
        self._max_state_size = size

    @classmethod
    def create_from_config(cls, config: Mapping[str, Any]) -> JobManagerCheckpointStorage:
        """A storage built from configuration keys alone."""
        return cls().configure(config)

    def get_checkpoint_path(self) -> str | None:
        """The base directory of checkpoint metadata (``None`` if kept in memory only)."""
        return self._checkpoint_path

    def get_savepoint_path(self) -> str | None:
        """The default base directory of savepoints, if any."""
        return self._savepoint_path

    def get_max_state_size(self) -> int:
        """The maximum size of one state in bytes."""
        return self._max_state_size

    def configure(self, config: Mapping[str, Any]) -> JobManagerCheckpointStorage:
        out = copy.copy(self)
        if out._checkpoint_path is None:
            out._checkpoint_path = _optional_path(
                _OPTS.CHECKPOINTS_DIRECTORY.read(config), _OPTS.CHECKPOINTS_DIRECTORY.key
            )
        if out._savepoint_path is None:
            out._savepoint_path = _optional_path(
                _OPTS.SAVEPOINT_DIRECTORY.read(config), _OPTS.SAVEPOINT_DIRECTORY.key
            )
        return out

    def create_checkpoint_storage(self, job_id: str) -> CheckpointStorageAccess:
        return MemCheckpointStorageAccess(
            job_id, self._checkpoint_path, self._savepoint_path, self._max_state_size
        )

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((self._checkpoint_path, self._savepoint_path, self._max_state_size))

    def __str__(self) -> str:
        return (
            "JobManagerCheckpointStorage (checkpoints to JobManager) "
            f"( maxStateSize: {self._max_state_size})"
        )

    def __repr__(self) -> str:
        return (
            f"JobManagerCheckpointStorage(checkpoint_path={self._checkpoint_path!r}, "
            f"max_state_size={self._max_state_size})"
        )


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints as files; state at or below the threshold is inlined into ``_metadata``.

    ``file_state_size_threshold`` None/-1 and ``write_buffer_size`` -1 mean "from the
    configuration" (defaults 20 KiB and 4 KiB); the threshold is at most 1 MiB.
    """

    MAX_FILE_STATE_THRESHOLD = MAX_FILE_STATE_THRESHOLD

    def __init__(
        self,
        checkpoint_path: str | os.PathLike[str] | None = None,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int = -1,
        savepoint_path: str | os.PathLike[str] | None = None,
        *,
        create_checkpoint_sub_dir: bool | None = None,
    ) -> None:
        if checkpoint_path is None:
            raise ValueError("checkpoint_path must not be None")
        threshold = -1 if file_state_size_threshold is None else file_state_size_threshold
        threshold = _int_arg(threshold, "file_state_size_threshold")
        if not -1 <= threshold <= MAX_FILE_STATE_THRESHOLD:
            raise ValueError(
                f"The threshold for file state size must be in [-1, {MAX_FILE_STATE_THRESHOLD}], "
                "where '-1' means to use the value from the deployment's configuration "
                f"(got {threshold})."
            )
        buffer = _int_arg(write_buffer_size, "write_buffer_size")
        if buffer < -1:
            raise ValueError(
                "The write buffer size must be not less than '-1', where '-1' means to use "
                f"the value from the deployment's configuration (got {buffer})."
            )
        self._checkpoint_path: str = validate_path(checkpoint_path, "checkpoint_path")
        self._savepoint_path = _optional_path(savepoint_path, "savepoint_path")
        self._file_state_threshold = threshold
        self._write_buffer_size = buffer
        self._create_checkpoint_sub_dir = create_checkpoint_sub_dir

    @classmethod
    def create_from_config(cls, config: Mapping[str, Any]) -> FileSystemCheckpointStorage:
        """A storage built from configuration keys alone (the checkpoint dir is required)."""
        key = _OPTS.CHECKPOINTS_DIRECTORY.find_key(config)
        if key is None:
            raise ValueError(
                "Cannot create the file system checkpoint storage: the configuration does not "
                f"specify the checkpoint directory '{_OPTS.CHECKPOINTS_DIRECTORY.key}'"
            )
        checkpoint_dir = validate_path(_OPTS.CHECKPOINTS_DIRECTORY.read(config), key)
        return cls(checkpoint_dir).configure(config)

    def get_checkpoint_path(self) -> str:
        """The base directory of checkpoints (the job's directory is created inside it)."""
        return self._checkpoint_path

    def get_savepoint_path(self) -> str | None:
        """The default base directory of savepoints, if any."""
        return self._savepoint_path

    def get_min_file_size_threshold(self) -> int:
        """State up to this size is stored inline in the metadata rather than in files."""
        if self._file_state_threshold >= 0:
            return self._file_state_threshold
        return _DEFAULT_THRESHOLD

    def get_write_buffer_size(self) -> int:
        """The write buffer size of checkpoint streams."""
        if self._write_buffer_size >= 0:
            return self._write_buffer_size
        return _DEFAULT_WRITE_BUFFER

    def get_create_checkpoint_sub_dir(self) -> bool:
        """Whether checkpoints go to a ``<job-id>`` subdirectory (default true)."""
        return True if self._create_checkpoint_sub_dir is None else self._create_checkpoint_sub_dir

    def configure(self, config: Mapping[str, Any]) -> FileSystemCheckpointStorage:
        out = copy.copy(self)
        if not 0 <= self._file_state_threshold <= MAX_FILE_STATE_THRESHOLD:
            out._file_state_threshold = _configured_threshold(config)
        if self._write_buffer_size < 0:
            out._write_buffer_size = _OPTS.FS_WRITE_BUFFER_SIZE.read(config)
        out._write_buffer_size = max(out._write_buffer_size, out._file_state_threshold)
        if out._savepoint_path is None:
            out._savepoint_path = _optional_path(
                _OPTS.SAVEPOINT_DIRECTORY.read(config), _OPTS.SAVEPOINT_DIRECTORY.key
            )
        if out._create_checkpoint_sub_dir is None and _OPTS.CREATE_CHECKPOINT_SUB_DIR.is_set(
            config
        ):
            out._create_checkpoint_sub_dir = _OPTS.CREATE_CHECKPOINT_SUB_DIR.read(config)
        return out

    def create_checkpoint_storage(self, job_id: str) -> CheckpointStorageAccess:
        return FsCheckpointStorageAccess(
            self._checkpoint_path,
            self._savepoint_path,
            job_id,
            self.get_min_file_size_threshold(),
            max(self.get_write_buffer_size(), self.get_min_file_size_threshold()),
            self.get_create_checkpoint_sub_dir(),
        )

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(
            (
                self._checkpoint_path,
                self._savepoint_path,
                self._file_state_threshold,
                self._write_buffer_size,
            )
        )

    def __str__(self) -> str:
        return (
            f"FileSystemCheckpointStorage (checkpoints: '{self._checkpoint_path}', "
            f"savepoints: '{self._savepoint_path}', "
            f"fileStateThreshold: {self._file_state_threshold}, "
            f"writeBufferSize: {self._write_buffer_size})"
        )

    def __repr__(self) -> str:
        return (
            f"FileSystemCheckpointStorage(checkpoint_path={self._checkpoint_path!r}, "
            f"file_state_size_threshold={self._file_state_threshold}, "
            f"write_buffer_size={self._write_buffer_size}, "
            f"savepoint_path={self._savepoint_path!r})"
        )


def _configured_threshold(config: Mapping[str, Any]) -> int:
    """The inline threshold from the configuration; an invalid value warns and uses 20 KiB."""
    value = _OPTS.FS_SMALL_FILE_THRESHOLD.read(config)
    if 0 <= value <= MAX_FILE_STATE_THRESHOLD:
        return value
    _LOG.warning(
        "Ignoring invalid file size threshold value (%s): %s - using default value %s instead.",
        _OPTS.FS_SMALL_FILE_THRESHOLD.key,
        value,
        _DEFAULT_THRESHOLD,
    )
    return _DEFAULT_THRESHOLD
