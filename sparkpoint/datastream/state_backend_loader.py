"""The state backend ``state.backend.type`` names, built from configuration keys alone.

Flink's ``StateBackendLoader``: used when the configuration names a backend and when the
program sets none (then ``hashmap``, the option's default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkpoint.config import CheckpointingOptions, RocksDBOptions, StateBackendOptions
from sparkpoint.datastream.state_backend import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)

__all__ = ["load_state_backend"]


def load_state_backend(config: Mapping[str, Any]) -> StateBackend:
    """A new backend of the type ``config`` names, configured from its keys."""
    if StateBackendOptions.STATE_BACKEND.read(config) == "hashmap":
        return HashMapStateBackend()
    backend = EmbeddedRocksDBStateBackend(CheckpointingOptions.INCREMENTAL_CHECKPOINTS.read(config))
    threads = RocksDBOptions.CHECKPOINT_TRANSFER_THREAD_NUM
    if threads.is_set(config):
        backend.set_number_of_transfer_threads(threads.read(config))
    return backend
