"""The embedded RocksDB state backend (rocksdict): keyed state in a local database per
subtask, epoch commits, full and incremental checkpoints, and rescaling restore."""

from sparkpoint.state.rocksdb.backend import RocksDBKeyedStateBackend, subtask_directory
from sparkpoint.state.rocksdb.options import PredefinedOptions, build_db_options, effective_settings

__all__ = [
    "PredefinedOptions",
    "RocksDBKeyedStateBackend",
    "build_db_options",
    "effective_settings",
    "subtask_directory",
]
