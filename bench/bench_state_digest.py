"""What the state-file digests cost: the keyed count's state at 1M keys (a LONG count and a
LONG sum per key, untyped keys, as ``CountAndEcho`` keeps it), checkpointed and savepointed
by both backends to files; prints one JSON line per backend and snapshot type.

    python bench/bench_state_digest.py                # 1,000,000 keys
    python bench/bench_state_digest.py --keys 10000   # a quick check that it runs

Baselines in the same run, on the same files:
* ``write_s``: the snapshot (the stream computes the SHA-256 as it writes) against
  ``sha256_s``, hashing the same bytes alone (what the digest adds to the write);
* ``restore_s``: a restore that verifies every file against ``restore_unverified_s``, the
  same handles with their digest dropped (as a snapshot written before digests reads).
Each figure is the median of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupsStateHandle,
    StreamStateHandle,
    stream_handles,
)
from sparkpoint.common.typeinfo import Types
from sparkpoint.fs import get_filesystem
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend

MAX_P = 128
_COUNTER = itertools.count()
BACKENDS: dict[str, Callable[[KeyedStateBackendParameters], Any]] = {
    "heap": HeapKeyedStateBackend,
    "rocksdb": RocksDBKeyedStateBackend,
}


def _params(local_dir: str) -> KeyedStateBackendParameters:
    rng = compute_key_group_range_for_operator_index(MAX_P, 1, 0)
    return KeyedStateBackendParameters("bench", "op", 0, 1, MAX_P, rng, local_dir)


def _fill(backend: Any, keys: int) -> None:
    count = backend.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
    total = backend.get_partitioned_state(ValueStateDescriptor("sum", Types.LONG()))
    for key in range(keys):
        backend.set_current_key(key)
        count.update(2)
        total.update(key * 2 + 1)


def _drop(h: StreamStateHandle) -> StreamStateHandle:
    return dataclasses.replace(h, digest=None) if isinstance(h, FileStateHandle) else h


def _without_digests(handle: KeyedStateHandle) -> KeyedStateHandle:
    """The same handle as a snapshot written before digests would have it."""
    if isinstance(handle, KeyGroupsStateHandle):
        return dataclasses.replace(handle, delegate=_drop(handle.delegate))
    assert isinstance(handle, IncrementalRemoteKeyedStateHandle)
    return dataclasses.replace(
        handle,
        shared_state=tuple(
            HandleAndLocalPath(_drop(x.handle), x.local_path) for x in handle.shared_state
        ),
        private_state=tuple(
            HandleAndLocalPath(_drop(x.handle), x.local_path) for x in handle.private_state
        ),
        meta_state_handle=_drop(handle.meta_state_handle),
    )


def _median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _run(kind: str, snapshot_type: str, keys: int, repeats: int, tmp: str) -> dict:
    clear_heap_cache()
    source = BACKENDS[kind](_params(os.path.join(tmp, f"{kind}-source")))
    _fill(source, keys)
    source.commit_local(1)
    fs = get_filesystem(tmp)

    def snapshot() -> KeyGroupsStateHandle:
        target = os.path.join(tmp, f"snap-{next(_COUNTER)}")
        os.makedirs(target)
        factory = FsCheckpointStreamFactory(fs, target, target, 0, 1 << 16)
        return source.snapshot(2, factory, snapshot_type)()

    write_s, handle = _median_time(snapshot, repeats)
    files = [h for h in stream_handles(handle) if isinstance(h, FileStateHandle)]
    assert files and all(f.digest is not None for f in files)
    contents = [open(f.path, "rb").read() for f in files]

    def hash_all() -> list[bytes]:
        return [hashlib.sha256(c).digest() for c in contents]

    sha_s, digests = _median_time(hash_all, repeats)
    assert digests == [f.digest for f in files]
    unverified = _without_digests(handle)

    def restore(h: KeyedStateHandle) -> Callable[[], None]:
        def go() -> None:
            clear_heap_cache()
            target = BACKENDS[kind](_params(os.path.join(tmp, f"{kind}-r-{next(_COUNTER)}")))
            target.restore([h])
            state = target.get_partitioned_state(ValueStateDescriptor("count", Types.LONG()))
            target.set_current_key(keys - 1)
            assert state.value() == 2
            target.dispose()

        return go

    restore_s, _ = _median_time(restore(handle), repeats)
    restore_unverified_s, _ = _median_time(restore(unverified), repeats)
    source.dispose()
    return {
        "bench": "state_digest",
        "backend": kind,
        "snapshot": snapshot_type,
        "keys": keys,
        "state_files": len(files),
        "file_bytes": sum(len(c) for c in contents),
        "write_s": round(write_s, 4),
        "sha256_s": round(sha_s, 4),
        "digest_share_of_write": round(sha_s / write_s, 4),
        "restore_s": round(restore_s, 4),
        "restore_unverified_s": round(restore_unverified_s, 4),
        "restore_overhead": round(restore_s / restore_unverified_s - 1, 4),
    }


def main(argv: list[str] | None = None) -> None:
    """Run every backend and snapshot type; one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=sorted(BACKENDS))
    args = parser.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="bench-digest-", dir=os.environ.get("BENCH_TMP"))
    try:
        for kind in args.backends:
            for snapshot_type in (SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT):
                print(
                    json.dumps(_run(kind, snapshot_type, args.keys, args.repeats, tmp)), flush=True
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
