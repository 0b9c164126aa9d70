"""State backends as ``pyflink.datastream`` spells them (1.x and 2.x names).

``HashMapStateBackend`` and ``EmbeddedRocksDBStateBackend`` only choose where working state
lives; checkpoint storage is configured separately. The legacy ``MemoryStateBackend``,
``FsStateBackend`` and ``RocksDBStateBackend`` are a working-state backend *plus* a
checkpoint storage, exposed through ``get_checkpoint_storage()``. All are configuration
only: picklable and shipped to executors, where they create per-subtask backends.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sparkpoint.checkpoint.handles import OperatorStateHandle
from sparkpoint.config import CheckpointingOptions, RocksDBOptions, parse_bool
from sparkpoint.datastream.checkpoint_storage import (
    CheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)
from sparkpoint.state.backend import (
    KeyedStateBackend,
    KeyedStateBackendParameters,
    OperatorStateBackend,
    StateBackendFactory,
)
from sparkpoint.state.heap import DefaultOperatorStateBackend, HeapKeyedStateBackend
from sparkpoint.state.rocksdb.options import PredefinedOptions, effective_settings

__all__ = [
    "CustomStateBackend",
    "EmbeddedRocksDBStateBackend",
    "FsStateBackend",
    "HashMapStateBackend",
    "MemoryStateBackend",
    "PredefinedOptions",
    "RocksDBStateBackend",
    "StateBackend",
]


class StateBackend(StateBackendFactory):
    """How working state is held and checkpointed (PyFlink's base class)."""

    def get_checkpoint_storage(self) -> CheckpointStorage | None:
        """The checkpoint storage this backend brings (legacy backends), else ``None``."""
        return None

    def create_operator_state_backend(
        self, restore_from: Sequence[OperatorStateHandle] = ()
    ) -> OperatorStateBackend:
        return DefaultOperatorStateBackend(restore_from)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return type(self).__name__


class HashMapStateBackend(StateBackend):
    """Working state as objects on the heap of the executor's Python worker."""

    def create_keyed_state_backend(self, params: KeyedStateBackendParameters) -> KeyedStateBackend:
        return HeapKeyedStateBackend(params)

    def keyed_backend_name(self) -> str:
        return HeapKeyedStateBackend.backend_name


def _check_positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class EmbeddedRocksDBStateBackend(StateBackend):
    """Working state in a local RocksDB per subtask (rocksdict); full or incremental."""

    def __init__(self, enable_incremental_checkpointing: bool | None = None) -> None:
        self._incremental = (
            None
            if enable_incremental_checkpointing is None
            else parse_bool(enable_incremental_checkpointing, "enable_incremental_checkpointing")
        )
        self._db_storage_paths: list[str] | None = None
        self._predefined_options = PredefinedOptions.DEFAULT
        self._options: Any = None
        self._transfer_threads = RocksDBOptions.CHECKPOINT_TRANSFER_THREAD_NUM.default
        self._ttl_compaction_filter = True

    def is_incremental_checkpoints_enabled(self) -> bool:
        """Whether snapshots upload only new SST files (default: off, as Flink)."""
        return bool(self._incremental)

    def supports_incremental_checkpoints(self) -> bool:
        return self.is_incremental_checkpoints_enabled()

    def set_db_storage_paths(self, *paths: str | None) -> None:
        """Local directories RocksDB puts its files in (``None`` or nothing: the default)."""
        if not paths or (len(paths) == 1 and paths[0] is None):
            self._db_storage_paths = None
            return
        checked = []
        for p in paths:
            if not isinstance(p, str) or not p:
                raise ValueError(f"RocksDB storage path must be a non-empty string, got {p!r}")
            if "://" in p and not p.startswith("file://"):
                raise ValueError(
                    f"Path {p} has a non-local scheme: RocksDB storage paths must be local"
                )
            local = p[len("file://") :] if p.startswith("file://") else p
            if not local.startswith("/"):
                raise ValueError(f"Relative paths are not supported as RocksDB storage path: {p}")
            checked.append(local)
        self._db_storage_paths = checked

    def get_db_storage_paths(self) -> list[str] | None:
        """The configured local paths, or ``None`` if none were configured."""
        return None if self._db_storage_paths is None else list(self._db_storage_paths)

    def set_predefined_options(self, options: int) -> None:
        """Choose a predefined RocksDB profile (``PredefinedOptions``)."""
        PredefinedOptions.name_of(options)
        self._predefined_options = int(options)

    def get_predefined_options(self) -> int:
        """The predefined profile (``PredefinedOptions.DEFAULT`` unless set)."""
        return self._predefined_options

    def set_options(
        self, options: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | str
    ) -> None:
        """RocksDB options applied on top of the predefined profile.

        Give a dict of ``state.backend.rocksdb.*`` keys or rocksdict setter names, a Python
        callable returning such a dict (called on the executor), or the dotted path of such
        a callable or dict (``"pkg.module.name"``). Java options-factory classes do not exist
        here.
        """
        if isinstance(options, str):
            _resolve_options(options)
        elif isinstance(options, Mapping):
            effective_settings(self._predefined_options, options)
            options = dict(options)
        elif not callable(options):
            raise ValueError(
                f"RocksDB options must be a dict, a callable or a dotted path, got {options!r}"
            )
        self._options = options

    def get_options(self) -> Any:
        """The options as given to ``set_options`` (``None`` if never set)."""
        return self._options

    def set_number_of_transfer_threads(self, number_of_transfering_threads: int) -> None:
        """Threads used to upload and download files in snapshots and restores."""
        self._transfer_threads = _check_positive(
            "number_of_transfering_threads", number_of_transfering_threads
        )

    def get_number_of_transfer_threads(self) -> int:
        """Threads used to transfer files (default 4)."""
        return self._transfer_threads

    set_number_of_transfering_threads = set_number_of_transfer_threads
    get_number_of_transfering_threads = get_number_of_transfer_threads

    def enable_ttl_compaction_filter(self) -> None:
        """Remove expired entries of TTL states that configure the RocksDB compaction-filter
        cleanup (the default). rocksdict has no compaction hook: a range scan does it when a
        snapshot is taken, at most once per shortest TTL."""
        self._ttl_compaction_filter = True

    def disable_ttl_compaction_filter(self) -> None:
        """Leave expired entries on disk (reads still never return them)."""
        self._ttl_compaction_filter = False

    def is_ttl_compaction_filter_enabled(self) -> bool:
        """Whether the TTL compaction filter is on."""
        return self._ttl_compaction_filter

    def _resolved_options(self) -> dict[str, Any] | None:
        opts = self._options
        if opts is None:
            return None
        if isinstance(opts, str):
            opts = _resolve_options(opts)
        if callable(opts) and not isinstance(opts, Mapping):
            opts = opts()
        if not isinstance(opts, Mapping):
            raise ValueError(f"RocksDB options factory returned {opts!r}, not a dict")
        return dict(opts)

    def keyed_backend_name(self) -> str:
        from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend

        return RocksDBKeyedStateBackend.backend_name

    def create_keyed_state_backend(self, params: KeyedStateBackendParameters) -> KeyedStateBackend:
        from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend

        return RocksDBKeyedStateBackend(
            params,
            incremental=self.is_incremental_checkpoints_enabled(),
            predefined_options=self._predefined_options,
            options=self._resolved_options(),
            db_storage_paths=self._db_storage_paths,
            transfer_threads=self._transfer_threads,
            ttl_compaction_filter=self._ttl_compaction_filter,
        )

    def __repr__(self) -> str:
        incremental = self.is_incremental_checkpoints_enabled()
        profile = PredefinedOptions.name_of(self._predefined_options)
        return f"{type(self).__name__}{{incremental={incremental}, predefinedOptions={profile}}}"


def _resolve_options(path: str) -> Any:
    module, _, name = path.rpartition(".")
    try:
        target = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError):
        target = None
    if target is None or not (callable(target) or isinstance(target, Mapping)):
        raise ValueError(
            f"RocksDB options {path!r} must name a Python callable or dict "
            "(pkg.module.name); Java options factories are not supported"
        )
    return target


class MemoryStateBackend(HashMapStateBackend):
    """Heap working state, checkpoints in the job master's memory (legacy 1.x backend)."""

    DEFAULT_MAX_STATE_SIZE = JobManagerCheckpointStorage.DEFAULT_MAX_STATE_SIZE

    def __init__(
        self,
        checkpoint_path: str | None = None,
        savepoint_path: str | None = None,
        max_state_size: int | None = None,
        using_asynchronous_snapshots: bool | None = None,
    ) -> None:
        if max_state_size is not None:
            _check_positive("max_state_size", max_state_size)
        self._checkpoint_path = checkpoint_path
        self._savepoint_path = savepoint_path
        self._max_state_size = max_state_size or self.DEFAULT_MAX_STATE_SIZE
        self._async = True if using_asynchronous_snapshots is None else using_asynchronous_snapshots
        self._storage = _job_manager_storage(checkpoint_path, savepoint_path, self._max_state_size)

    def get_checkpoint_storage(self) -> CheckpointStorage:
        return self._storage

    def get_max_state_size(self) -> int:
        """The cap on each individual state (default 5 MiB)."""
        return self._max_state_size

    def is_using_asynchronous_snapshots(self) -> bool:
        """The flag given at construction (default true): whether checkpoint uploads run in
        the background on the executor while later epochs run, or within the epoch."""
        return self._async

    def asynchronous_snapshots(self) -> bool:
        return self._async

    def get_checkpoint_path(self) -> str | None:
        """Where checkpoint metadata is persisted (``None``: memory only)."""
        return self._checkpoint_path

    def get_savepoint_path(self) -> str | None:
        """The default savepoint directory."""
        return self._savepoint_path

    get_default_savepoint_directory = get_savepoint_path

    def __repr__(self) -> str:
        return (
            f"MemoryStateBackend (data in heap memory / checkpoints to JobManager) "
            f"(checkpoints: '{self._checkpoint_path}', savepoints: '{self._savepoint_path}',"
            f" asynchronous: {self._async}, maxStateSize: {self._max_state_size})"
        )


def _job_manager_storage(
    checkpoint_path: str | None, savepoint_path: str | None, max_state_size: int
) -> CheckpointStorage:
    storage = JobManagerCheckpointStorage(checkpoint_path, max_state_size)
    if savepoint_path is not None:
        storage = storage.configure({CheckpointingOptions.SAVEPOINT_DIRECTORY.key: savepoint_path})
    return storage


class FsStateBackend(HashMapStateBackend):
    """Heap working state, checkpoints as files (legacy 1.x backend)."""

    def __init__(
        self,
        checkpoint_directory_uri: str | None = None,
        default_savepoint_directory_uri: str | None = None,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int | None = None,
        using_asynchronous_snapshots: bool | None = None,
    ) -> None:
        if not checkpoint_directory_uri:
            raise ValueError("FsStateBackend needs a checkpoint_directory_uri")
        self._checkpoint_path = checkpoint_directory_uri
        self._savepoint_path = default_savepoint_directory_uri
        self._async = True if using_asynchronous_snapshots is None else using_asynchronous_snapshots
        # Unset sizes stay -1: the job's configuration fills them in when the job starts.
        self._storage = FileSystemCheckpointStorage(
            checkpoint_directory_uri,
            file_state_size_threshold,
            -1 if write_buffer_size is None else write_buffer_size,
            default_savepoint_directory_uri,
        )

    def get_checkpoint_storage(self) -> CheckpointStorage:
        return self._storage

    def get_checkpoint_path(self) -> str:
        """The base directory of checkpoints."""
        return self._checkpoint_path

    def get_savepoint_path(self) -> str | None:
        """The default savepoint directory."""
        return self._savepoint_path

    get_default_savepoint_directory = get_savepoint_path

    def get_min_file_size_threshold(self) -> int:
        """State up to this many bytes is stored inline in the metadata (unless set: the
        default of ``execution.checkpointing.data-inline-threshold``)."""
        return self._storage.get_min_file_size_threshold()

    def get_write_buffer_size(self) -> int:
        """Write buffer of checkpoint streams in bytes (unless set: the default of
        ``execution.checkpointing.write-buffer-size``)."""
        return self._storage.get_write_buffer_size()

    def is_using_asynchronous_snapshots(self) -> bool:
        """The flag given at construction (default true): whether checkpoint uploads run in
        the background on the executor while later epochs run, or within the epoch."""
        return self._async

    def asynchronous_snapshots(self) -> bool:
        return self._async

    def __repr__(self) -> str:
        return (
            f"File State Backend (checkpoints: '{self._checkpoint_path}', savepoints: "
            f"'{self._savepoint_path}', asynchronous: {self._async}, fileStateThreshold: "
            f"{self.get_min_file_size_threshold()})"
        )


class RocksDBStateBackend(EmbeddedRocksDBStateBackend):
    """RocksDB working state plus a checkpoint stream backend (legacy 1.x backend)."""

    def __init__(
        self,
        checkpoint_data_uri: str | None = None,
        enable_incremental_checkpointing: bool | None = None,
        checkpoint_stream_backend: StateBackend | None = None,
    ) -> None:
        super().__init__(enable_incremental_checkpointing)
        if checkpoint_stream_backend is None:
            if not checkpoint_data_uri:
                raise ValueError(
                    "RocksDBStateBackend needs a checkpoint_data_uri or a checkpoint_stream_backend"
                )
            checkpoint_stream_backend = FsStateBackend(checkpoint_data_uri)
        elif not isinstance(checkpoint_stream_backend, StateBackend):
            raise TypeError(
                f"checkpoint_stream_backend must be a StateBackend (MemoryStateBackend or "
                f"FsStateBackend), got {checkpoint_stream_backend!r}"
            )
        elif checkpoint_stream_backend.get_checkpoint_storage() is None:
            raise ValueError(
                f"checkpoint_stream_backend {checkpoint_stream_backend!r} has no checkpoint "
                "storage; use MemoryStateBackend or FsStateBackend"
            )
        self._checkpoint_backend = checkpoint_stream_backend

    def get_checkpoint_backend(self) -> StateBackend:
        """The backend whose checkpoint storage persists the snapshot streams."""
        return self._checkpoint_backend

    def get_checkpoint_storage(self) -> CheckpointStorage | None:
        return self._checkpoint_backend.get_checkpoint_storage()


class CustomStateBackend(StateBackend):
    """A user's own Python state backend (a ``sparkpoint.state.backend.StateBackendFactory``)."""

    def __init__(self, user_backend: StateBackendFactory) -> None:
        if not isinstance(user_backend, StateBackendFactory):
            raise TypeError(
                "CustomStateBackend needs an instance of "
                f"sparkpoint.state.backend.StateBackendFactory, got {type(user_backend).__name__}"
            )
        self._user_backend = user_backend

    def get_user_backend(self) -> StateBackendFactory:
        """The wrapped backend."""
        return self._user_backend

    def create_keyed_state_backend(self, params: KeyedStateBackendParameters) -> KeyedStateBackend:
        return self._user_backend.create_keyed_state_backend(params)

    def create_operator_state_backend(
        self, restore_from: Sequence[OperatorStateHandle] = ()
    ) -> OperatorStateBackend:
        return self._user_backend.create_operator_state_backend(restore_from)

    def supports_incremental_checkpoints(self) -> bool:
        return self._user_backend.supports_incremental_checkpoints()

    def keyed_backend_name(self) -> str:
        return self._user_backend.keyed_backend_name()

    def get_checkpoint_storage(self) -> CheckpointStorage | None:
        getter = getattr(self._user_backend, "get_checkpoint_storage", None)
        return getter() if callable(getter) else None
