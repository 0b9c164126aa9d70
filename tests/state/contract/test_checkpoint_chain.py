"""A chain of 20 checkpoints with retention 2 on filesystem storage leaves exactly the files
the two retained checkpoints reference (incremental SSTs included), and restores exactly."""

from __future__ import annotations

import os

import pytest

from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
    StreamStateHandle,
)
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore
from sparkpoint.state.descriptors import MapStateDescriptor, ValueStateDescriptor
from sparkpoint.state.typeinfo import Types

from .harness import BACKENDS, Harness, owner

V = ValueStateDescriptor("v", Types.LONG())
M = MapStateDescriptor("m", Types.INT(), Types.STRING())
PARALLELISM = 2
CHAIN = 20
KEYS = 2000


def _norm(path: str) -> str:
    return os.path.realpath(path.removeprefix("file://"))


def _files_of(handle: StreamStateHandle) -> set[str]:
    return {_norm(handle.path)} if isinstance(handle, FileStateHandle) else set()


def _referenced(checkpoint: CompletedCheckpoint) -> set[str]:
    out = _files_of(checkpoint.location.metadata_handle)
    for op in checkpoint.operator_states:
        for sub in op.subtask_states.values():
            for h in sub.managed_keyed_state:
                if isinstance(h, KeyGroupsStateHandle):
                    out |= _files_of(h.delegate)
                elif isinstance(h, IncrementalRemoteKeyedStateHandle):
                    out |= _files_of(h.meta_state_handle)
                    for part in (*h.shared_state, *h.private_state):
                        out |= _files_of(part.handle)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_chain_of_20_with_retention_2_leaves_no_unreferenced_file(tmp_path, backend) -> None:
    h = Harness(backend, "filesystem", str(tmp_path))
    access = h.access()
    store = CompletedCheckpointStore(max_retained=2, shared_state_registry=h.registry)
    backends = [h.create(i, PARALLELISM) for i in range(PARALLELISM)]
    model_v: dict[int, int] = {}
    model_m: dict[int, dict[int, str]] = {}
    try:
        for cid in range(1, CHAIN + 1):
            touched = range(0, KEYS, 7) if cid == 1 else range(cid * 13, KEYS, 97)
            for key in range(KEYS) if cid == 1 else touched:
                b = backends[owner(key, PARALLELISM)]
                b.set_current_key(key)
                b.get_partitioned_state(V).update(key * 10 + cid)
                b.get_partitioned_state(M).put(cid % 5, f"{key}@{cid}")
                model_v[key] = key * 10 + cid
                model_m.setdefault(key, {})[cid % 5] = f"{key}@{cid}"
            location = access.initialize_location_for_checkpoint(cid)
            subtasks = {}
            for i, b in enumerate(backends):
                b.commit_local(cid)
                handle = b.snapshot(cid, location)()
                assert handle is not None
                # As the coordinator does: placeholders are resolved before _metadata is written.
                handle = handle.register_shared_states(store.shared_state_registry, cid)
                subtasks[i] = OperatorSubtaskState(managed_keyed_state=(handle,))
            props = CheckpointProperties.for_checkpoint(None)
            metadata = CheckpointMetadata(
                cid, (OperatorState("op-1", PARALLELISM, 128, subtasks),), (), props
            )
            completed = write_metadata(location, metadata)
            store.add_checkpoint_and_subsume_oldest(
                CompletedCheckpoint(
                    h.job_id, cid, cid, cid, metadata.operator_states, props, completed, metadata
                )
            )
            for b in backends:
                b.notify_checkpoint_complete(cid)

        retained = store.get_all_checkpoints()
        assert [c.checkpoint_id for c in retained] == [CHAIN - 1, CHAIN]
        referenced = set().union(*(_referenced(c) for c in retained))
        job_dir = access.checkpoints_directory
        on_disk = {_norm(os.path.join(d, f)) for d, _, files in os.walk(job_dir) for f in files}
        assert on_disk == referenced
        assert len(on_disk) > 2

        latest = retained[-1]
        handles = [
            sub.managed_keyed_state[0] for sub in latest.operator_states[0].subtask_states.values()
        ]
        if backend == "rocksdb-incremental":
            # The latest checkpoint re-uses SST files uploaded by earlier checkpoints.
            registry = store.shared_state_registry
            created_by = []
            for hd in handles:
                assert isinstance(hd, IncrementalRemoteKeyedStateHandle)
                for part in hd.shared_state:
                    entry = registry.get_entry(part.handle.physical_id)
                    assert entry is not None
                    created_by.append(entry.created_by_checkpoint_id)
            assert min(created_by) < CHAIN - 1
        restored = h.create(0, 1)
        restored.restore(handles)
        for key in range(KEYS):
            restored.set_current_key(key)
            assert restored.get_partitioned_state(V).value() == model_v[key]
            assert dict(restored.get_partitioned_state(M).items()) == model_m[key]
    finally:
        h.close_all()
