"""State backend benchmarks; prints one JSON object per line (same run, so ratios are fair).

    python bench/bench_state.py                 # everything, 1 GiB snapshot state
    python bench/bench_state.py --scale 0.1     # 10% of the keys (quick run)
    python bench/bench_state.py --only heap_ops

Sections (each a function in ``BENCHMARKS``; RocksDB parts are registered the same way):

* ``heap_ops``: ValueState get+update per second on the heap backend against a plain dict.
* ``heap_snapshot``: full snapshot (checkpoint and savepoint) and restore of N keys x 1 KiB
  against a raw sequential write and read of the same bytes (ratio = raw time / our time).
  Heap checkpoints restore lazily, so both the restore call and the time until every key
  group is decoded are reported. The raw read comes from the page cache right after the
  write (as does the restore), and creates no Python objects: a heap restore must create
  one per key and value.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.common.typeinfo import Types
from sparkpoint.fs import get_filesystem
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)

__all__ = ["BENCHMARKS", "emit", "main"]

MAX_P = 128
Result = dict[str, Any]


def emit(record: Result) -> None:
    """Print one JSON line."""
    print(json.dumps(record), flush=True)


def heap_params(local_dir: str) -> KeyedStateBackendParameters:
    """Parameters of a single-subtask heap backend with LONG keys."""
    rng = compute_key_group_range_for_operator_index(MAX_P, 1, 0)
    return KeyedStateBackendParameters(
        "bench", "op", 0, 1, MAX_P, rng, local_dir, key_serializer=Types.LONG().get_serializer()
    )


# -- value-state operations ---------------------------------------------------------------


def bench_heap_ops(scale: float, work: str) -> list[Result]:
    """ValueState value()+update() per second vs ``d[k] = d.get(k, 0) + 1``."""
    n_keys = max(1000, int(100_000 * scale))
    rounds = 5
    keys = list(range(n_keys))
    groups = [assign_to_key_group(k, MAX_P) for k in keys]

    d: dict[int, int] = {}
    t0 = time.perf_counter()
    for _ in range(rounds):
        for k in keys:
            d[k] = d.get(k, 0) + 1
    dict_rate = rounds * n_keys / (time.perf_counter() - t0)

    b = HeapKeyedStateBackend(heap_params(os.path.join(work, "ops")))
    state = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    value, update, set_key = state.value, state.update, b.set_current_key
    t0 = time.perf_counter()
    for _ in range(rounds):
        for k in keys:
            set_key(k)
            update((value() or 0) + 1)
    full_rate = rounds * n_keys / (time.perf_counter() - t0)

    set_kg = b.set_current_key_and_group
    t0 = time.perf_counter()
    for _ in range(rounds):
        for k, kg in zip(keys, groups):
            set_kg(k, kg)
            update((value() or 0) + 1)
    fast_rate = rounds * n_keys / (time.perf_counter() - t0)
    b.set_current_key(5)
    assert value() == 2 * rounds
    b.dispose()
    return [
        {"bench": "value_get_update", "impl": "plain_dict", "ops_per_s": round(dict_rate)},
        {
            "bench": "value_get_update",
            "impl": "heap_set_current_key",
            "ops_per_s": round(full_rate),
            "ratio_vs_dict": round(full_rate / dict_rate, 3),
        },
        {
            "bench": "value_get_update",
            "impl": "heap_precomputed_key_group",
            "ops_per_s": round(fast_rate),
            "ratio_vs_dict": round(fast_rate / dict_rate, 3),
        },
    ]


# -- snapshot / restore -------------------------------------------------------------------


def raw_write_read(path: str, chunks: list[bytes]) -> tuple[float, float]:
    """Seconds to write ``chunks`` sequentially (with fsync) and to read the file back."""
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for c in chunks:
            f.write(c)
        f.flush()
        os.fsync(f.fileno())
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass
    read_s = time.perf_counter() - t0
    os.remove(path)
    return write_s, read_s


def _snapshot_restore(
    b: HeapKeyedStateBackend, kind: str, work: str, n_keys: int
) -> tuple[float, float, float, float, int]:
    """(sync part s, snapshot s incl. fsync, restore s, restore incl. decoding every key
    group s, file bytes) of one snapshot type."""
    chk = os.path.join(work, f"chk-{kind}")
    os.makedirs(chk)
    factory = FsCheckpointStreamFactory(get_filesystem(chk), chk, chk, 20 * 1024, 4 * 1024 * 1024)
    t0 = time.perf_counter()
    upload = b.snapshot(1, factory, kind)
    sync_s = time.perf_counter() - t0
    handle = upload()
    assert handle is not None
    # fsync the file so the comparison with the fsync'ed raw write is fair
    fd = os.open(handle.delegate.path, os.O_RDONLY)  # type: ignore[attr-defined]
    os.fsync(fd)
    os.close(fd)
    snap_s = time.perf_counter() - t0
    gc.collect()
    r = HeapKeyedStateBackend(heap_params(os.path.join(work, f"restore-{kind}")))
    t0 = time.perf_counter()
    r.restore([handle])
    restore_s = time.perf_counter() - t0
    groups = r._heap_tables()["v"].groups
    gc.disable()
    groups.materialize()  # heap checkpoints decode lazily: force every key group now
    gc.enable()
    decoded_s = time.perf_counter() - t0
    assert sum(len(g) for g in groups.values()) == n_keys
    r.dispose()
    del r
    gc.collect()
    shutil.rmtree(chk, ignore_errors=True)
    return sync_s, snap_s, restore_s, decoded_s, handle.state_size


def bench_heap_snapshot(scale: float, work: str) -> list[Result]:
    """Full snapshot + restore of N x 1 KiB against raw sequential I/O of the same bytes.

    Each measurement is the best of ``REPEATS`` runs, raw and ours interleaved, because the
    machine's disk is shared and noisy.
    """
    repeats = 2
    n_keys = max(1000, int(1_048_576 * scale))
    value_size = 1024
    payloads = [os.urandom(16) * (value_size // 16) for _ in range(256)]
    values = [payloads[i % 256][:-8] + i.to_bytes(8, "big") for i in range(n_keys)]
    total = n_keys * value_size

    b = HeapKeyedStateBackend(heap_params(os.path.join(work, "heap")))
    state = b.get_partitioned_state(ValueStateDescriptor("v", Types.PRIMITIVE_ARRAY(Types.BYTE())))
    for k in range(n_keys):
        b.set_current_key_and_group(k, assign_to_key_group(k, MAX_P))
        state.update(values[k])

    raw = [raw_write_read(os.path.join(work, "raw.bin"), values) for _ in range(repeats)]
    write_s = min(r[0] for r in raw)
    read_s = min(r[1] for r in raw)
    del values
    gc.collect()
    out: list[Result] = [
        {
            "bench": "raw_sequential_io",
            "bytes": total,
            "write_fsync_s": round(write_s, 3),
            "read_s": round(read_s, 3),
        }
    ]
    for kind in (SnapshotType.CHECKPOINT, SnapshotType.SAVEPOINT):
        runs = [_snapshot_restore(b, kind, work, n_keys) for _ in range(repeats)]
        sync_s = min(r[0] for r in runs)
        snap_s = min(r[1] for r in runs)
        restore_s = min(r[2] for r in runs)
        decoded_s = min(r[3] for r in runs)
        out.append(
            {
                "bench": "heap_full_snapshot",
                "snapshot_type": kind,
                "keys": n_keys,
                "bytes": total,
                "file_bytes": runs[0][4],
                "sync_part_ms": round(sync_s * 1000, 2),
                "snapshot_s": round(snap_s, 3),
                "restore_s": round(restore_s, 3),
                "restore_incl_decode_all_s": round(decoded_s, 3),
                "snapshot_ratio_vs_raw_write": round(write_s / snap_s, 3),
                "restore_ratio_vs_raw_read": round(read_s / restore_s, 3),
                "restore_incl_decode_ratio_vs_raw_read": round(read_s / decoded_s, 3),
                "snapshot_mb_s": round(total / snap_s / 1e6, 1),
                "restore_mb_s": round(total / restore_s / 1e6, 1),
            }
        )

    t0 = time.perf_counter()
    b.commit_local(1)
    commit_s = time.perf_counter() - t0
    out.append(
        {
            "bench": "heap_commit_local_all_dirty",
            "bytes": total,
            "commit_s": round(commit_s, 3),
            "ratio_vs_raw_write": round(write_s / commit_s, 3),
        }
    )
    b.dispose()
    clear_heap_cache()
    return out


BENCHMARKS: dict[str, Callable[[float, str], list[Result]]] = {
    "heap_ops": bench_heap_ops,
    "heap_snapshot": bench_heap_snapshot,
}


def _register_rocksdb() -> None:
    """RocksDB benchmarks live in ``bench/bench_state_rocksdb.py`` when present."""
    try:
        from bench_state_rocksdb import ROCKSDB_BENCHMARKS  # type: ignore[import-not-found]
    except ImportError:
        return
    BENCHMARKS.update(ROCKSDB_BENCHMARKS)


def main(argv: list[str] | None = None) -> None:
    """Run the selected benchmarks and print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of the default sizes (1.0 = 1 GiB snapshot state)",
    )
    parser.add_argument(
        "--only", action="append", default=None, help="run only these benchmarks (repeatable)"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    _register_rocksdb()
    for name, fn in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        work = tempfile.mkdtemp(prefix=f"bench-{name}-")
        try:
            for record in fn(args.scale, work):
                emit({"suite": name, **record})
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
