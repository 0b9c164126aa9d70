"""Issue 12: getters and defaults exactly as the seeds say them.

Seeds: /work/shared/seeds/002_f724661db4b25451.txt (pyflink.datastream 1.10: CheckpointConfig,
FsStateBackend, RocksDBStateBackend, StreamExecutionEnvironment), 004_86a341b35be6c9a3.txt
(FsCheckpointStreamFactory: MAX_FILE_STATE_THRESHOLD and the nested
FsCheckpointStateOutputStream).
"""

from __future__ import annotations

import pathlib

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import ByteStreamStateHandle, StreamStateHandle
from sparkpoint.common import Configuration
from sparkpoint.datastream import (
    CheckpointConfig,
    EmbeddedRocksDBStateBackend,
    ExternalizedCheckpointCleanup,
    FsStateBackend,
    StreamExecutionEnvironment,
    TimeCharacteristic,
)
from sparkpoint.fs import get_filesystem


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
    factory = FsCheckpointStreamFactory(get_filesystem("memory://seed"), "memory://seed/c",
                                        "memory://seed/s", 10, 64)
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
