"""State backend API: PyFlink names, getters and defaults, errors, pickling, real backends."""

from __future__ import annotations

import os
import pickle

import pytest

from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.common.typeinfo import Types
from sparkpoint.datastream import (
    CustomStateBackend,
    EmbeddedRocksDBStateBackend,
    FileSystemCheckpointStorage,
    FsStateBackend,
    HashMapStateBackend,
    JobManagerCheckpointStorage,
    MemoryStateBackend,
    PredefinedOptions,
    RocksDBStateBackend,
    StateBackend,
)
from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index


def params(tmp_path, sub: str = "a") -> KeyedStateBackendParameters:
    return KeyedStateBackendParameters(
        "job",
        "op",
        0,
        1,
        128,
        compute_key_group_range_for_operator_index(128, 1, 0),
        os.path.join(str(tmp_path), sub),
    )


def rocks_options() -> dict[str, int]:
    return {"max_open_files": 64}


def test_predefined_options_constants() -> None:
    assert (
        PredefinedOptions.DEFAULT,
        PredefinedOptions.SPINNING_DISK_OPTIMIZED,
        PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM,
        PredefinedOptions.FLASH_SSD_OPTIMIZED,
    ) == (0, 1, 2, 3)


def test_memory_state_backend_getters() -> None:
    b = MemoryStateBackend()
    assert b.get_max_state_size() == MemoryStateBackend.DEFAULT_MAX_STATE_SIZE == 5242880
    assert b.is_using_asynchronous_snapshots() is True
    assert b.get_checkpoint_path() is None and b.get_savepoint_path() is None
    assert isinstance(b.get_checkpoint_storage(), JobManagerCheckpointStorage)
    b2 = MemoryStateBackend("file:///tmp/c", "file:///tmp/s", 1000, False)
    assert b2.get_max_state_size() == 1000 and not b2.is_using_asynchronous_snapshots()
    storage = b2.get_checkpoint_storage()
    assert storage.get_max_state_size() == 1000
    assert storage.get_savepoint_path() is not None
    assert b2.get_default_savepoint_directory() == "file:///tmp/s"
    with pytest.raises(ValueError, match="max_state_size must be a positive integer"):
        MemoryStateBackend(max_state_size=0)
    assert isinstance(b.create_keyed_state_backend.__self__, HashMapStateBackend)


def test_fs_state_backend_getters(tmp_path) -> None:
    b = FsStateBackend(str(tmp_path / "c"), str(tmp_path / "s"), 1024, 8192, False)
    assert b.get_checkpoint_path() == str(tmp_path / "c")
    assert b.get_savepoint_path() == b.get_default_savepoint_directory() == str(tmp_path / "s")
    assert b.get_min_file_size_threshold() == 1024
    assert b.get_write_buffer_size() == 8192
    assert not b.is_using_asynchronous_snapshots()
    storage = b.get_checkpoint_storage()
    assert isinstance(storage, FileSystemCheckpointStorage)
    assert storage.get_min_file_size_threshold() == 1024
    d = FsStateBackend("file:///x")
    # Seed 002: unset, these are the defaults of the configuration options (20 KiB, 4096).
    assert d.get_min_file_size_threshold() == 20480 and d.get_write_buffer_size() == 4096
    assert d.is_using_asynchronous_snapshots()
    with pytest.raises(ValueError, match="checkpoint_directory_uri"):
        FsStateBackend()
    with pytest.raises(ValueError, match="threshold"):
        FsStateBackend("file:///x", file_state_size_threshold=2 * 1024 * 1024)


def test_embedded_rocksdb_configuration() -> None:
    b = EmbeddedRocksDBStateBackend()
    assert not b.is_incremental_checkpoints_enabled() and not b.supports_incremental_checkpoints()
    assert EmbeddedRocksDBStateBackend(True).is_incremental_checkpoints_enabled()
    # Seed 002: "the configured local DB storage paths, or null, if none were configured".
    assert b.get_db_storage_paths() is None
    b.set_db_storage_paths("/tmp/r1", "file:///tmp/r2")
    assert b.get_db_storage_paths() == ["/tmp/r1", "/tmp/r2"]
    b.set_db_storage_paths(None)
    assert b.get_db_storage_paths() is None
    with pytest.raises(ValueError, match="non-local scheme"):
        b.set_db_storage_paths("s3://bucket/x")
    with pytest.raises(ValueError, match="Relative paths"):
        b.set_db_storage_paths("rel/path")
    assert b.get_predefined_options() == PredefinedOptions.DEFAULT
    b.set_predefined_options(PredefinedOptions.FLASH_SSD_OPTIMIZED)
    assert b.get_predefined_options() == 3
    with pytest.raises(ValueError, match="Unknown PredefinedOptions"):
        b.set_predefined_options(9)
    assert b.get_options() is None
    b.set_options({"state.backend.rocksdb.files.open": 100})
    assert b.get_options() == {"state.backend.rocksdb.files.open": 100}
    with pytest.raises(ValueError, match="Unknown RocksDB option"):
        b.set_options({"no_such_option": 1})
    with pytest.raises(ValueError, match="Java options factories are not supported"):
        b.set_options("org.apache.flink.MyOptionsFactory")
    b.set_options(f"{__name__}.rocks_options")
    assert b.get_options() == f"{__name__}.rocks_options"
    b.set_options(rocks_options)
    assert b.get_number_of_transfer_threads() == 4
    b.set_number_of_transfering_threads(2)
    assert b.get_number_of_transfering_threads() == b.get_number_of_transfer_threads() == 2
    with pytest.raises(ValueError, match="positive integer"):
        b.set_number_of_transfer_threads(0)
    assert b.is_ttl_compaction_filter_enabled()
    b.disable_ttl_compaction_filter()
    assert not b.is_ttl_compaction_filter_enabled()
    b.enable_ttl_compaction_filter()
    assert b.is_ttl_compaction_filter_enabled()
    assert b.get_checkpoint_storage() is None
    assert pickle.loads(pickle.dumps(b)) == b


def test_rocksdb_state_backend_legacy(tmp_path) -> None:
    b = RocksDBStateBackend(str(tmp_path / "c"), True)
    assert b.is_incremental_checkpoints_enabled()
    assert isinstance(b.get_checkpoint_backend(), FsStateBackend)
    assert b.get_checkpoint_backend().get_checkpoint_path() == str(tmp_path / "c")
    assert isinstance(b.get_checkpoint_storage(), FileSystemCheckpointStorage)
    m = RocksDBStateBackend(checkpoint_stream_backend=MemoryStateBackend())
    assert isinstance(m.get_checkpoint_storage(), JobManagerCheckpointStorage)
    with pytest.raises(ValueError, match="checkpoint_data_uri or a checkpoint_stream_backend"):
        RocksDBStateBackend()
    with pytest.raises(ValueError, match="has no checkpoint storage"):
        RocksDBStateBackend(checkpoint_stream_backend=HashMapStateBackend())


def test_backends_create_working_state(tmp_path) -> None:
    heap = HashMapStateBackend().create_keyed_state_backend(params(tmp_path, "h"))
    assert isinstance(heap, HeapKeyedStateBackend)
    rocks_backend = EmbeddedRocksDBStateBackend(False)
    rocks_backend.set_options(rocks_options)
    rocks_backend.set_predefined_options(PredefinedOptions.SPINNING_DISK_OPTIMIZED)
    rocks = rocks_backend.create_keyed_state_backend(params(tmp_path, "r"))
    d = ValueStateDescriptor("v", Types.LONG())
    for backend in (heap, rocks):
        backend.set_current_key("k")
        state = backend.get_partitioned_state(d)
        assert isinstance(state, ValueState)
        state.update(3)
        backend.commit_local(1)
    handle = heap.snapshot(1, MemCheckpointStreamFactory(), SnapshotType.SAVEPOINT)()
    rocks.restore([handle])
    rocks.set_current_key("k")
    assert rocks.get_partitioned_state(d).value() == 3
    op = MemoryStateBackend().create_operator_state_backend()
    op.get_broadcast_state(MapStateDescriptor("s", Types.STRING(), Types.INT())).put("a", 1)
    for b in (heap, rocks):
        b.dispose()
    clear_heap_cache()


def test_custom_state_backend(tmp_path) -> None:
    user_backend = HashMapStateBackend()
    custom = CustomStateBackend(user_backend)
    assert custom.get_user_backend() is user_backend
    keyed = custom.create_keyed_state_backend(params(tmp_path))
    assert isinstance(keyed, HeapKeyedStateBackend)
    assert custom.get_checkpoint_storage() is None and not custom.supports_incremental_checkpoints()
    with pytest.raises(TypeError, match=r"sparkpoint\.state\.backend\.StateBackendFactory"):
        CustomStateBackend("org.example.MyBackendFactory")  # type: ignore[arg-type]
    clear_heap_cache()


def test_all_backends_are_state_backends_and_picklable(tmp_path) -> None:
    for b in (
        HashMapStateBackend(),
        EmbeddedRocksDBStateBackend(True),
        MemoryStateBackend(),
        FsStateBackend(str(tmp_path)),
        RocksDBStateBackend(str(tmp_path)),
    ):
        assert isinstance(b, StateBackend)
        assert pickle.loads(pickle.dumps(b)) == b
        assert repr(b)


def test_state_api_spellings() -> None:
    ttl = (
        StateTtlConfig.new_builder(1000)
        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
        .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
        .set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)
        .cleanup_full_snapshot()
        .cleanup_incrementally(10, True)
        .cleanup_in_rocksdb_compact_filter(500)
        .build()
    )
    assert ttl.get_ttl_millis() == 1000 and ttl.is_enabled()
    cs = ttl.get_cleanup_strategies()
    assert cs.in_full_snapshot() and cs.is_cleanup_in_background()
    assert cs.get_incremental_cleanup_strategy().get_cleanup_size() == 10
    assert cs.get_incremental_cleanup_strategy().run_cleanup_for_every_record()
    compact = cs.get_rocksdb_compact_filter_cleanup_strategy()
    assert compact.get_query_time_after_num_entries() == 500
    off = StateTtlConfig.new_builder(5).disable_cleanup_in_background().build()
    assert off.get_cleanup_strategies().get_incremental_cleanup_strategy() is None
    with pytest.raises(ValueError, match="TTL must be positive"):
        StateTtlConfig.new_builder(0)
    d = ValueStateDescriptor("v", Types.INT())
    d.enable_time_to_live(ttl)
    assert d.get_name() == "v" and d.get_ttl_config() is ttl
    assert ListStateDescriptor("l", Types.INT()).elem_type_info == Types.INT()
    m = MapStateDescriptor("m", Types.STRING(), Types.INT())
    assert m.type_info == Types.MAP(Types.STRING(), Types.INT())
    r = ReducingStateDescriptor("r", lambda a, b: a + b, Types.INT())
    assert r.get_reduce_function().reduce(1, 2) == 3
    with pytest.raises(TypeError, match="AggregateFunction"):
        AggregatingStateDescriptor("a", lambda x: x, Types.INT())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty string"):
        ValueStateDescriptor("", Types.INT())
