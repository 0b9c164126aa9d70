"""Backends, storages and helpers shared by the contract tests."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.fs_storage import FsCheckpointStorageAccess
from sparkpoint.checkpoint.handles import KeyedStateHandle
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.checkpoint.shared_registry import SharedStateRegistry
from sparkpoint.checkpoint.streams import CheckpointStreamFactory
from sparkpoint.state.backend import KeyedStateBackend, KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.heap import HeapKeyedStateBackend
from sparkpoint.state.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.testing import ManualClock

BACKENDS = ("heap", "rocksdb-incremental", "rocksdb-full")
STORAGES = ("memory", "filesystem")
MAX_P = 128
TIMERS = "timers"  # the MAP state every harness backend keeps in its timer layout


@dataclass
class Harness:
    """Creates subtask backends of one kind and stream factories of one storage."""

    backend: str
    storage: str
    root: str
    clock: ManualClock = field(default_factory=lambda: ManualClock(1_000_000))
    job_id: str = "0123456789abcdef0123456789abcdef"
    _created: list[KeyedStateBackend] = field(default_factory=list)
    registry: SharedStateRegistry = field(default_factory=SharedStateRegistry)
    _access: FsCheckpointStorageAccess | None = None
    _generation: int = 0

    @property
    def is_rocksdb(self) -> bool:
        return self.backend.startswith("rocksdb")

    def create(
        self,
        subtask: int = 0,
        parallelism: int = 1,
        max_parallelism: int = MAX_P,
        *,
        backend: str | None = None,
        local_dir: str | None = None,
        timer_states: frozenset[str] = frozenset({TIMERS}),
    ) -> KeyedStateBackend:
        """A fresh backend for ``subtask`` of ``parallelism`` (own local directory)."""
        kind = backend or self.backend
        if local_dir is None:
            self._generation += 1
            local_dir = os.path.join(self.root, "local", f"g{self._generation}-{kind}-{subtask}")
        params = KeyedStateBackendParameters(
            job_id=self.job_id,
            operator_id="op-1",
            subtask_index=subtask,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            key_group_range=compute_key_group_range_for_operator_index(
                max_parallelism, parallelism, subtask
            ),
            local_dir=local_dir,
            clock=self.clock,
            timer_states=timer_states,
        )
        created: KeyedStateBackend
        if kind == "heap":
            created = HeapKeyedStateBackend(params)
        else:
            created = RocksDBKeyedStateBackend(
                params, incremental=kind == "rocksdb-incremental", transfer_threads=2
            )
        self._created.append(created)
        return created

    def access(self) -> FsCheckpointStorageAccess:
        """The filesystem checkpoint storage of the job (filesystem storage only)."""
        if self._access is None:
            self._access = FsCheckpointStorageAccess(
                os.path.join(self.root, "checkpoints"), None, self.job_id, file_size_threshold=16
            )
            self._access.initialize_base_locations_for_checkpoint()
        return self._access

    def factory(self, checkpoint_id: int) -> CheckpointStreamFactory:
        """Where checkpoint ``checkpoint_id`` writes its state."""
        if self.storage == "memory":
            return MemCheckpointStreamFactory(max_state_size=256 * 1024 * 1024)
        return self.access().initialize_location_for_checkpoint(checkpoint_id)

    def snapshot(
        self,
        backend: KeyedStateBackend,
        checkpoint_id: int,
        snapshot_type: str = SnapshotType.CHECKPOINT,
        factory: CheckpointStreamFactory | None = None,
    ) -> KeyedStateHandle | None:
        """Take a snapshot, run its upload step and register its shared state (as the
        coordinator does), so placeholders are replaced by the registered handles."""
        handle = backend.snapshot(
            checkpoint_id, factory or self.factory(checkpoint_id), snapshot_type
        )()
        if handle is None:
            return None
        return handle.register_shared_states(self.registry, checkpoint_id)

    def close_all(self) -> None:
        """Close every backend created (idempotent)."""
        for b in self._created:
            try:
                b.close()
            except Exception:
                pass
        self._created.clear()


def owner(key: Any, parallelism: int, max_parallelism: int = MAX_P) -> int:
    """The subtask that owns ``key`` at ``parallelism``."""
    return compute_operator_index_for_key_group(
        max_parallelism, parallelism, assign_to_key_group(key, max_parallelism)
    )


def fill(
    backend: KeyedStateBackend, keys: Iterable[Any], states: dict[str, Any], writer: Any
) -> None:
    """Apply ``writer(key, states)`` for each key in ``backend``'s range."""
    rng = backend.key_group_range
    for key in keys:
        if rng.contains(assign_to_key_group(key, MAX_P)):
            backend.set_current_key(key)
            writer(key, {name: backend.get_partitioned_state(d) for name, d in states.items()})


def handles_of(items: Sequence[KeyedStateHandle | None]) -> list[KeyedStateHandle]:
    """The non-empty handles."""
    return [h for h in items if h is not None]
