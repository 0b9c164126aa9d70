"""Issue 12: getters and defaults exactly as the seeds say them.

Seeds: /work/shared/seeds/002_f724661db4b25451.txt (pyflink.datastream 1.10: CheckpointConfig,
FsStateBackend, RocksDBStateBackend, StreamExecutionEnvironment), 004_86a341b35be6c9a3.txt
(FsCheckpointStreamFactory: MAX_FILE_STATE_THRESHOLD and the nested
FsCheckpointStateOutputStream).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    RelativeFileStateHandle,
    StreamStateHandle,
)
from sparkpoint.common import Configuration
from sparkpoint.datastream import (
    CheckpointConfig,
    CheckpointingMode,
    EmbeddedRocksDBStateBackend,
    ExternalizedCheckpointCleanup,
    FileSystemCheckpointStorage,
    FsStateBackend,
    JobManagerCheckpointStorage,
    MemoryStateBackend,
    PredefinedOptions,
    RocksDBStateBackend,
    StreamExecutionEnvironment,
    TimeCharacteristic,
)
from sparkpoint.fs import get_filesystem
from tests.fixtures.recording_fs import under
from tests.fixtures.s3 import S3Server, ensure_s3_configured


def test_externalized_checkpoint_cleanup_is_none_until_configured() -> None:
    """Seed 002: "The cleanup behaviour for externalized checkpoints or None if none is
    configured"."""
    config = CheckpointConfig()
    assert config.get_externalized_checkpoint_cleanup() is None
    assert not config.is_externalized_checkpoints_enabled()
    config.enable_externalized_checkpoints(ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION)
    assert (
        config.get_externalized_checkpoint_cleanup()
        is ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION
    )
    configured = CheckpointConfig(
        {"execution.checkpointing.externalized-checkpoint-retention": "delete_on_cancellation"}
    )
    assert (
        configured.get_externalized_checkpoint_cleanup()
        is ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION
    )
    # Round trip: an unset retention stays unset.
    rebuilt = CheckpointConfig(CheckpointConfig().to_dict())
    assert rebuilt.get_externalized_checkpoint_cleanup() is None


def test_fs_state_backend_defaults_are_the_options_defaults(tmp_path: pathlib.Path) -> None:
    """Seed 002: not explicitly configured, the threshold and the write buffer are the
    defaults of FS_SMALL_FILE_THRESHOLD (20 KiB) and FS_WRITE_BUFFER_SIZE (4096)."""
    backend = FsStateBackend(f"file://{tmp_path}/ckpt")
    assert backend.get_min_file_size_threshold() == 20 * 1024
    assert backend.get_write_buffer_size() == 4096
    explicit = FsStateBackend(f"file://{tmp_path}/ckpt", None, 512, 1024)
    assert explicit.get_min_file_size_threshold() == 512
    assert explicit.get_write_buffer_size() == 1024


def _write(factory: object, size: int) -> StreamStateHandle | None:
    stream = factory.create_checkpoint_state_output_stream()  # type: ignore[attr-defined]
    stream.write(b"x" * size)
    return stream.close_and_get_handle()  # type: ignore[no-any-return]


def test_fs_state_backend_honours_a_configured_memory_threshold(tmp_path: pathlib.Path) -> None:
    """``state.backend.fs.memory-threshold`` in the job's configuration decides what is
    inlined, when the program's FsStateBackend sets no threshold (Flink's configure())."""
    conf = Configuration().set_string("state.backend.fs.memory-threshold", "1kb")
    env = StreamExecutionEnvironment(conf)
    env.set_state_backend(FsStateBackend(f"file://{tmp_path}/ckpt"))
    storage = env._settings("job").checkpoint_storage
    assert storage.get_min_file_size_threshold() == 1024
    access = storage.create_checkpoint_storage("job")
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(1)
    small, big = _write(location, 1024), _write(location, 1025)
    assert isinstance(small, ByteStreamStateHandle)
    assert not isinstance(big, ByteStreamStateHandle)
    assert len(list((tmp_path / "ckpt" / "job" / "chk-1").iterdir())) == 1  # only the big one
    # A threshold set in the program wins over the configuration.
    env.set_state_backend(FsStateBackend(f"file://{tmp_path}/ckpt", None, 100))
    assert env._settings("job").checkpoint_storage.get_min_file_size_threshold() == 100


def test_stream_factory_class_attributes() -> None:
    """Seed 004: ``static int MAX_FILE_STATE_THRESHOLD`` and the nested class
    ``FsCheckpointStreamFactory.FsCheckpointStateOutputStream``."""
    assert FsCheckpointStreamFactory.MAX_FILE_STATE_THRESHOLD == 1024 * 1024
    factory = FsCheckpointStreamFactory(
        get_filesystem("memory://seed"), "memory://seed/c", "memory://seed/s", 10, 64
    )
    stream = factory.create_checkpoint_state_output_stream()
    assert isinstance(stream, FsCheckpointStreamFactory.FsCheckpointStateOutputStream)
    stream.close()


def test_rocksdb_storage_paths_are_none_until_configured() -> None:
    """Seed 002: "the configured local DB storage paths, or null, if none were configured"."""
    backend = EmbeddedRocksDBStateBackend()
    assert backend.get_db_storage_paths() is None
    backend.set_db_storage_paths("/tmp/a")
    assert backend.get_db_storage_paths() == ["/tmp/a"]


def test_time_characteristic_sets_the_watermark_interval() -> None:
    """Seed 002: IngestionTime or EventTime set a watermark interval of 200 ms (and, as in
    Flink, ProcessingTime sets 0)."""
    env = StreamExecutionEnvironment()
    assert env.get_config().get_auto_watermark_interval() == 200
    env.set_stream_time_characteristic(TimeCharacteristic.ProcessingTime)
    assert env.get_config().get_auto_watermark_interval() == 0
    env.set_stream_time_characteristic(TimeCharacteristic.IngestionTime)
    assert env.get_config().get_auto_watermark_interval() == 200


def test_opening_a_state_file_on_an_object_store_checks_nothing(
    s3_server: S3Server, recorded_access: list[tuple[str, str]]
) -> None:
    """Seed 004: the factory "does not ensure that the directory gets created" and never checks
    for existence: object stores throttle HEAD requests. The coordinator creates the
    locations; a task opening, writing and publishing a state file sends only writes."""
    ensure_s3_configured(s3_server)
    base = s3_server.unique_prefix()
    storage = FileSystemCheckpointStorage(f"{base}/ckpt", 1024, 256)
    access = storage.create_checkpoint_storage("job")
    access.initialize_base_locations_for_checkpoint()
    location = access.initialize_location_for_checkpoint(1)
    reference = location.get_location_reference()
    del recorded_access[:]
    with s3_server.record() as requests:
        task_side = storage.create_checkpoint_storage("job")  # what a task builds
        factory = task_side.resolve_checkpoint_storage_location(1, reference)
        inline = _write(factory, 1024)
        handle = _write(factory, 64 * 1024)
    assert isinstance(inline, ByteStreamStateHandle)
    assert isinstance(handle, RelativeFileStateHandle)
    chk = f"{base}/ckpt/job/chk-1"
    # The task's only file access is the one write of the state file.
    assert under(recorded_access, f"{base}/ckpt") == [("write", f"{chk}/{handle.relative_path}")]
    remote = [(op, path) for op, path in recorded_access if not op.startswith("local-")]
    assert remote == [("write", f"{chk}/{handle.relative_path}")]
    # And on the wire: one PUT (If-None-Match: *), no HEAD, GET or listing.
    assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in requests] == [
        ("PUT", handle.relative_path)
    ]
    assert requests[0].headers.get("If-None-Match") == "*"
    assert handle.read_all() == b"x" * 64 * 1024


def _fresh_env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment()


@pytest.mark.parametrize(
    ("what", "get", "expected"),
    [
        # Seed 002, CheckpointConfig's constants and what a fresh config reports.
        ("DEFAULT_MODE", lambda: CheckpointConfig.DEFAULT_MODE, CheckpointingMode.EXACTLY_ONCE),
        ("DEFAULT_TIMEOUT", lambda: CheckpointConfig.DEFAULT_TIMEOUT, 600000),
        ("DEFAULT_MIN_PAUSE", lambda: CheckpointConfig.DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS, 0),
        ("DEFAULT_MAX_CONCURRENT", lambda: CheckpointConfig.DEFAULT_MAX_CONCURRENT_CHECKPOINTS, 1),
        (
            "mode",
            lambda: CheckpointConfig().get_checkpointing_mode(),
            CheckpointingMode.EXACTLY_ONCE,
        ),
        ("timeout", lambda: CheckpointConfig().get_checkpoint_timeout(), 600000),
        ("min pause", lambda: CheckpointConfig().get_min_pause_between_checkpoints(), 0),
        ("max concurrent", lambda: CheckpointConfig().get_max_concurrent_checkpoints(), 1),
        ("enabled", lambda: CheckpointConfig().is_checkpointing_enabled(), False),
        ("fail on errors", lambda: CheckpointConfig().is_fail_on_checkpointing_errors(), True),
        ("externalized", lambda: CheckpointConfig().is_externalized_checkpoints_enabled(), False),
        (
            "prefer checkpoint",
            lambda: CheckpointConfig().is_prefer_checkpoint_for_recovery(),
            False,
        ),
        # Seed 002, StreamExecutionEnvironment: "the checkpointing interval or -1 if
        # checkpointing is disabled"; chaining on; Flink's buffer timeout of 100 ms.
        ("env interval", lambda: _fresh_env().get_checkpoint_interval(), -1),
        ("env mode", lambda: _fresh_env().get_checkpointing_mode(), CheckpointingMode.EXACTLY_ONCE),
        ("env chaining", lambda: _fresh_env().is_chaining_enabled(), True),
        ("env buffer timeout", lambda: _fresh_env().get_buffer_timeout(), 100),
        ("env max parallelism", lambda: _fresh_env().get_max_parallelism(), -1),
        ("env state backend", lambda: _fresh_env().get_state_backend(), None),
        # Seed 002, MemoryStateBackend: DEFAULT_MAX_STATE_SIZE = 5242880, asynchronous.
        (
            "memory DEFAULT_MAX_STATE_SIZE",
            lambda: MemoryStateBackend.DEFAULT_MAX_STATE_SIZE,
            5242880,
        ),
        ("memory max state", lambda: MemoryStateBackend().get_max_state_size(), 5242880),
        ("memory async", lambda: MemoryStateBackend().is_using_asynchronous_snapshots(), True),
        ("fs async", lambda: FsStateBackend("/tmp/c").is_using_asynchronous_snapshots(), True),
        # Seed 002, RocksDBStateBackend getters when nothing is set.
        ("rocksdb options", lambda: RocksDBStateBackend("/tmp/c").get_options(), None),
        (
            "rocksdb predefined",
            lambda: RocksDBStateBackend("/tmp/c").get_predefined_options(),
            PredefinedOptions.DEFAULT,
        ),
        (
            "rocksdb incremental",
            lambda: RocksDBStateBackend("/tmp/c").is_incremental_checkpoints_enabled(),
            False,
        ),
        (
            "rocksdb ttl filter",
            lambda: RocksDBStateBackend("/tmp/c").is_ttl_compaction_filter_enabled(),
            True,
        ),
        # Seed 003, checkpoint storages.
        (
            "jm DEFAULT_MAX_STATE_SIZE",
            lambda: JobManagerCheckpointStorage.DEFAULT_MAX_STATE_SIZE,
            5 * 1024 * 1024,
        ),
        ("jm checkpoint path", lambda: JobManagerCheckpointStorage().get_checkpoint_path(), None),
        ("jm savepoint path", lambda: JobManagerCheckpointStorage().get_savepoint_path(), None),
        (
            "jm max state",
            lambda: JobManagerCheckpointStorage().get_max_state_size(),
            5 * 1024 * 1024,
        ),
        (
            "fs MAX_FILE_STATE_THRESHOLD",
            lambda: FileSystemCheckpointStorage.MAX_FILE_STATE_THRESHOLD,
            1024 * 1024,
        ),
        (
            "fs write buffer",
            lambda: FileSystemCheckpointStorage("/tmp/c").get_write_buffer_size(),
            4096,
        ),
        (
            "fs savepoint path",
            lambda: FileSystemCheckpointStorage("/tmp/c").get_savepoint_path(),
            None,
        ),
        # Seed 002's constants.
        (
            "modes",
            lambda: (CheckpointingMode.EXACTLY_ONCE.value, CheckpointingMode.AT_LEAST_ONCE.value),
            (0, 1),
        ),
        (
            "cleanups",
            lambda: (
                ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION.value,
                ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION.value,
            ),
            (0, 1),
        ),
        (
            "time characteristics",
            lambda: (
                TimeCharacteristic.ProcessingTime.value,
                TimeCharacteristic.IngestionTime.value,
                TimeCharacteristic.EventTime.value,
            ),
            (0, 1, 2),
        ),
        (
            "predefined options",
            lambda: (
                PredefinedOptions.DEFAULT,
                PredefinedOptions.SPINNING_DISK_OPTIMIZED,
                PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM,
                PredefinedOptions.FLASH_SSD_OPTIMIZED,
            ),
            (0, 1, 2, 3),
        ),
    ],
)
def test_seed_default(what: str, get: Callable[[], object], expected: object) -> None:
    assert get() == expected


def test_file_system_checkpoint_storage_needs_a_path() -> None:
    """Seed 003: ``raise ValueError("checkpoint_path must not be None")``."""
    with pytest.raises(ValueError, match=r"^checkpoint_path must not be None$"):
        FileSystemCheckpointStorage()
