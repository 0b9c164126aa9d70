"""Retention soak: many incremental RocksDB checkpoints with retention R leave exactly the
files the retained checkpoints reference (issue 9's acceptance: 1,000 checkpoints, R = 3).

The state layer and the checkpoint layer run directly, without Spark: one keyed operator of
``--parallelism`` RocksDB subtasks (re-created every epoch, as the runtime's tasks are), random
updates and deletes of a value state, and one checkpoint per epoch through the real storage,
``CompletedCheckpointStore``, ``SharedStateRegistry`` and ``CheckpointsCleaner``; every
``--abort-every``-th checkpoint is aborted after its upload. Every ``--audit-every``
checkpoints and at the end, the job directory is walked and compared with the files of the
retained ``_metadata`` files (``sparkpoint.checkpoint.audit``); at the end every key is read
back from a restore of the latest checkpoint and compared with the expected value.

Prints one JSON object per audit and a summary line; exits 1 if any check failed. Usage:
``python scripts/retention_soak.py [--checkpoints 1000] [--retained 3] [--dir DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.audit import DirectoryAudit, audit_checkpoint_directory
from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.handles import StateObject
from sparkpoint.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint, write_metadata
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.checkpoint.storage import CheckpointStorageLocation
from sparkpoint.checkpoint.store import CompletedCheckpoint, CompletedCheckpointStore
from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.state.typeinfo import Types

__all__ = ["KeyedJob", "SoakResult", "run_soak"]

OPERATOR = "counts"
COUNT = ValueStateDescriptor("count", Types.LONG())


@dataclass
class KeyedJob:
    """One keyed operator on incremental RocksDB, checkpointed as the runtime does it.

    ``base`` is the checkpoint directory (``<base>/<job id>/chk-N``); local databases live
    under ``local_dir``. ``expected`` holds the value every key must have after the last
    epoch; ``restore`` starts from a snapshot as ``execution.state-recovery.path`` does.
    """

    base: str
    local_dir: str
    parallelism: int = 2
    retained: int = 3
    max_parallelism: int = 128
    inline_threshold: int = 1024
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    expected: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.storage = FileSystemCheckpointStorage(
            self.base, file_state_size_threshold=self.inline_threshold
        )
        self.access = self.storage.create_checkpoint_storage(self.job_id)
        self.access.initialize_base_locations_for_checkpoint()
        self.job_dir = f"{self.base.rstrip('/')}/{self.job_id}"
        self.store = CompletedCheckpointStore(self.retained)
        self.cleaner = CheckpointsCleaner(parallel_mode=True, max_workers=2)
        self.epoch = 0
        self.next_checkpoint_id = 1
        self.snapshot_types: list[str] = []
        self._notify: Callable[[RocksDBKeyedStateBackend], None] | None = None

    # ---- subtasks --------------------------------------------------------------------

    def _params(self, subtask: int) -> KeyedStateBackendParameters:
        rng = compute_key_group_range_for_operator_index(
            self.max_parallelism, self.parallelism, subtask
        )
        return KeyedStateBackendParameters(
            self.job_id,
            OPERATOR,
            subtask,
            self.parallelism,
            self.max_parallelism,
            rng,
            self.local_dir,
        )

    def _backend(self, subtask: int) -> RocksDBKeyedStateBackend:
        """The subtask's backend, opened anew (a task's life) and told the latest news."""
        backend = RocksDBKeyedStateBackend(self._params(subtask), incremental=True)
        if self._notify is not None:
            self._notify(backend)
        return backend

    def subtask_of(self, key: int) -> int:
        """The subtask that owns ``key``."""
        group = assign_to_key_group(key, self.max_parallelism)
        return compute_operator_index_for_key_group(self.max_parallelism, self.parallelism, group)

    # ---- epochs and checkpoints ------------------------------------------------------

    def restore(self, pointer: str, claim_mode: str = "NO_CLAIM") -> CheckpointMetadata:
        """Start from the snapshot at ``pointer``: every subtask restores its key groups."""
        metadata, location = load_checkpoint(self.storage, pointer)
        restored = CompletedCheckpoint.from_metadata(self.job_id, metadata, location)
        self.store.add_restored_checkpoint(restored, claim_mode, self.cleaner)
        self.next_checkpoint_id = metadata.checkpoint_id + 1
        op = metadata.get_operator_state(OPERATOR)
        assert op is not None, f"{pointer} holds no state of operator {OPERATOR!r}"
        handles = [h for s in op.subtask_states.values() for h in s.managed_keyed_state]
        for subtask in range(self.parallelism):
            backend = self._backend(subtask)
            rng = backend.key_group_range
            mine = [c for h in handles if (c := h.get_intersection(rng)) is not None]
            backend.restore(mine)
            backend.commit_local(self.epoch)
            backend.close()
        return metadata

    def run_epoch(self, updates: dict[int, int | None]) -> None:
        """Apply ``updates`` (``None`` clears the key) and commit them locally."""
        self.epoch += 1
        by_subtask: dict[int, list[tuple[int, int | None]]] = {}
        for key, value in updates.items():
            by_subtask.setdefault(self.subtask_of(key), []).append((key, value))
            if value is None:
                self.expected.pop(key, None)
            else:
                self.expected[key] = value
        for subtask in range(self.parallelism):
            backend = self._backend(subtask)
            state = backend.get_partitioned_state(COUNT)
            for key, value in by_subtask.get(subtask, ()):
                backend.set_current_key(key)
                if value is None:
                    state.clear()
                else:
                    state.update(value)
            backend.commit_local(self.epoch)
            backend.close()
        self._notify = None

    def checkpoint(self, abort: bool = False) -> CompletedCheckpoint | None:
        """Snapshot every subtask into the next ``chk-N``; complete it (or abort it)."""
        checkpoint_id = self.next_checkpoint_id
        self.next_checkpoint_id += 1
        snapshot_type = (
            SnapshotType.FULL_CHECKPOINT
            if self.store.forces_full_snapshot
            else SnapshotType.CHECKPOINT
        )
        self.snapshot_types.append(snapshot_type)
        location = self.access.initialize_location_for_checkpoint(checkpoint_id)
        states = self._snapshot(checkpoint_id, location, snapshot_type)
        if abort:
            handles: list[StateObject] = [
                h for s in states[0].subtask_states.values() for h in s.all_handles()
            ]
            self.cleaner.clean_aborted_checkpoint(
                checkpoint_id,
                location,
                handles,
                shared_state_registry=self.store.shared_state_registry,
            )
            self._notify = lambda b: b.notify_checkpoint_aborted(checkpoint_id)
            return None
        properties = CheckpointProperties.for_checkpoint("RETAIN_ON_CANCELLATION")
        states = self.store.shared_state_registry.register_all(states, checkpoint_id)
        metadata = CheckpointMetadata(checkpoint_id, states, (), properties)
        completed = write_metadata(location, metadata)
        now = int(time.time() * 1000)
        checkpoint = CompletedCheckpoint(
            self.job_id, checkpoint_id, now, now, states, properties, completed, metadata
        )
        self.store.add_checkpoint_and_subsume_oldest(checkpoint, self.cleaner)
        self._notify = lambda b: b.notify_checkpoint_complete(checkpoint_id)
        return checkpoint

    def savepoint(self, target: str) -> str:
        """A canonical savepoint of every subtask in a new directory under ``target``."""
        checkpoint_id = self.next_checkpoint_id
        self.next_checkpoint_id += 1
        location = self.access.initialize_location_for_savepoint(checkpoint_id, target)
        states = self._snapshot(checkpoint_id, location, SnapshotType.SAVEPOINT)
        metadata = CheckpointMetadata(
            checkpoint_id, states, (), CheckpointProperties.for_savepoint()
        )
        return write_metadata(location, metadata).external_pointer

    def _snapshot(
        self, checkpoint_id: int, location: CheckpointStorageLocation, snapshot_type: str
    ) -> tuple[OperatorState, ...]:
        subtasks: dict[int, OperatorSubtaskState] = {}
        for subtask in range(self.parallelism):
            backend = self._backend(subtask)
            handle = backend.snapshot(checkpoint_id, location, snapshot_type)()
            backend.close()
            subtasks[subtask] = OperatorSubtaskState(() if handle is None else (handle,))
        return (OperatorState(OPERATOR, self.parallelism, self.max_parallelism, subtasks),)

    def read_all(self, keys: Any) -> dict[int, int]:
        """The value of each of ``keys`` that has one, read from the subtasks' state."""
        found: dict[int, int] = {}
        backends = [self._backend(s) for s in range(self.parallelism)]
        try:
            states = [b.get_partitioned_state(COUNT) for b in backends]
            for key in keys:
                subtask = self.subtask_of(key)
                backends[subtask].set_current_key(key)
                value = states[subtask].value()
                if value is not None:
                    found[key] = value
        finally:
            for backend in backends:
                backend.close()
        return found

    def audit(self) -> DirectoryAudit:
        """The job directory against its retained checkpoints, once cleanup has settled."""
        assert self.cleaner.wait_until_idle(60), "checkpoint cleanup did not settle"
        return audit_checkpoint_directory(self.job_dir)

    def close(self) -> None:
        """Stop the cleaner (after it finished) and close nothing else: backends are closed
        after every use; their directories stay under ``local_dir``."""
        self.cleaner.close()


@dataclass
class SoakResult:
    """What a soak did and found."""

    checkpoints: int
    aborted: int
    audits: list[DirectoryAudit]
    seconds: float
    restored_keys: int
    wrong_keys: int

    @property
    def ok(self) -> bool:
        """Every audit exact and every key restored with its expected value."""
        return all(a.exact for a in self.audits) and self.wrong_keys == 0


def _updates(rng: random.Random, keys: int, count: int) -> dict[int, int | None]:
    out: dict[int, int | None] = {}
    for _ in range(count):
        key = rng.randrange(keys)
        out[key] = None if rng.random() < 0.1 else rng.randrange(1 << 40)
    return out


def run_soak(
    base: str,
    local_dir: str,
    checkpoints: int = 1000,
    retained: int = 3,
    parallelism: int = 2,
    keys: int = 20_000,
    updates_per_epoch: int = 400,
    audit_every: int = 50,
    abort_every: int = 17,
    seed: int = 9,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> SoakResult:
    """Run ``checkpoints`` completed checkpoints (plus the aborted ones) and check the
    directory every ``audit_every`` and at the end; see the module docstring."""
    rng = random.Random(seed)
    job = KeyedJob(base, local_dir, parallelism, retained)
    audits: list[DirectoryAudit] = []
    start = time.perf_counter()
    completed = aborted = 0
    try:
        while completed < checkpoints:
            job.run_epoch(_updates(rng, keys, updates_per_epoch))
            abort = abort_every > 0 and job.next_checkpoint_id % abort_every == 0
            job.checkpoint(abort=abort)
            aborted += abort
            completed += not abort
            if not abort and (completed % audit_every == 0 or completed == checkpoints):
                audit = job.audit()
                audits.append(audit)
                if report is not None:
                    report(_audit_json(audit, completed, time.perf_counter() - start))
        latest = job.store.get_latest_checkpoint()
        assert latest is not None
        check = KeyedJob(base, f"{local_dir}/verify", parallelism, retained)
        check.restore(latest.external_pointer)
        restored = check.read_all(range(keys))
        wrong = sum(1 for k in range(keys) if restored.get(k) != job.expected.get(k))
        check.close()
    finally:
        job.close()
    return SoakResult(
        completed, aborted, audits, time.perf_counter() - start, len(job.expected), wrong
    )


def _audit_json(audit: DirectoryAudit, completed: int, seconds: float) -> dict[str, Any]:
    return {
        "soak": "retention",
        "completed_checkpoints": completed,
        "retained": list(audit.checkpoint_ids),
        "files": len(audit.files),
        "referenced": len(audit.referenced),
        "unreferenced": sorted(audit.unreferenced)[:10],
        "missing": sorted(audit.missing)[:10],
        "exact": audit.exact,
        "seconds": round(seconds, 2),
    }


@contextlib.contextmanager
def _temp_dirs(base: str | None) -> Iterator[tuple[str, str]]:
    root = tempfile.mkdtemp(prefix="retention-soak-", dir=base)
    try:
        yield f"{root}/checkpoints", f"{root}/local"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", type=int, default=1000)
    parser.add_argument("--retained", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--updates", type=int, default=400, help="updates per epoch")
    parser.add_argument("--audit-every", type=int, default=50)
    parser.add_argument("--abort-every", type=int, default=17)
    parser.add_argument("--dir", default=None, help="parent of the temporary directories")
    args = parser.parse_args(argv)
    with _temp_dirs(args.dir) as (checkpoint_dir, local_dir):
        result = run_soak(
            checkpoint_dir,
            local_dir,
            args.checkpoints,
            args.retained,
            args.parallelism,
            args.keys,
            args.updates,
            args.audit_every,
            args.abort_every,
            report=lambda line: print(json.dumps(line), flush=True),
        )
    print(
        json.dumps(
            {
                "soak": "retention-summary",
                "checkpoints": result.checkpoints,
                "aborted": result.aborted,
                "retained": args.retained,
                "audits": len(result.audits),
                "all_exact": all(a.exact for a in result.audits),
                "keys": result.restored_keys,
                "wrong_keys": result.wrong_keys,
                "seconds": round(result.seconds, 1),
                "ok": result.ok,
            }
        )
    )
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
