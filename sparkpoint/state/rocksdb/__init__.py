"""The embedded RocksDB keyed state backend (rocksdict): local DB, options, incremental
checkpoints and rescaling restore."""

from sparkpoint.state.rocksdb.backend import (
    RocksDBKeyedStateBackend,
    create_rocksdb_keyed_backend,
    subtask_directory,
)
from sparkpoint.state.rocksdb.options import PredefinedOptions, build_db_options, effective_settings

__all__ = [
    "PredefinedOptions",
    "RocksDBKeyedStateBackend",
    "build_db_options",
    "create_rocksdb_keyed_backend",
    "effective_settings",
    "subtask_directory",
]
