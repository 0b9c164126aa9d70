"""RocksDB parts of the state benchmarks (registered into ``bench_state.py``'s ``BENCHMARKS``).

    python bench/bench_state.py --only rocksdb_ops --only rocksdb_snapshot
    python bench/bench_state_rocksdb.py --scale 0.1      # just the RocksDB parts

* ``rocksdb_ops``: ValueState value()+update() per second on the RocksDB backend (one
  ``commit_local`` per round = per epoch) against a plain rocksdict get+put loop.
* ``rocksdb_snapshot``: 1 GiB (1M keys x 1 KiB) full checkpoint, savepoint and incremental
  checkpoint, and their restores, against a raw sequential write (fsync'ed) and read of the
  same bytes (ratio = raw time / our time; aim >= 0.8).
* ``rocksdb_incremental``: bytes uploaded by an incremental checkpoint after touching 1% of
  1M keys, against the first (full) incremental checkpoint and a full key-groups snapshot
  (aim <= 5%).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rocksdict

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import (
    FileStateHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupsStateHandle,
)
from sparkpoint.common.typeinfo import Types
from sparkpoint.fs import get_filesystem
from sparkpoint.state.backend import KeyedStateBackendParameters, SnapshotType
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend

__all__ = ["ROCKSDB_BENCHMARKS"]

MAX_P = 128
Result = dict[str, Any]
_EPOCH_KEYS = 65_536


def _params(local_dir: str) -> KeyedStateBackendParameters:
    rng = compute_key_group_range_for_operator_index(MAX_P, 1, 0)
    return KeyedStateBackendParameters(
        "bench", "op", 0, 1, MAX_P, rng, local_dir, key_serializer=Types.LONG().get_serializer()
    )


def _backend(local_dir: str, incremental: bool = True) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(_params(local_dir), incremental=incremental, transfer_threads=4)


def _factory(directory: str, threshold: int = 20 * 1024) -> FsCheckpointStreamFactory:
    os.makedirs(os.path.join(directory, "shared"), exist_ok=True)
    return FsCheckpointStreamFactory(
        get_filesystem(directory),
        directory,
        os.path.join(directory, "shared"),
        threshold,
        4 * 1024 * 1024,
    )


def _files(handle: KeyedStateHandle) -> list[str]:
    if isinstance(handle, KeyGroupsStateHandle):
        parts = [handle.delegate]
    else:
        assert isinstance(handle, IncrementalRemoteKeyedStateHandle)
        parts = [p.handle for p in (*handle.shared_state, *handle.private_state)]
        parts.append(handle.meta_state_handle)
    return [h.path for h in parts if isinstance(h, FileStateHandle)]


def _fsync(paths: list[str]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def _read_all(path: str) -> float:
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass
    return time.perf_counter() - t0


def _raw_write_read(path: str, values: Callable[[], Any]) -> tuple[float, float, float]:
    """Seconds for a sequential fsync'ed write of the same bytes, a cold read (page cache
    dropped with ``posix_fadvise``) and a warm read of them."""
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for v in values():
            f.write(v)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    write_s = time.perf_counter() - t0
    cold_s = _read_all(path)
    warm_s = _read_all(path)
    os.remove(path)
    return write_s, cold_s, warm_s


# -- value-state operations ---------------------------------------------------------------


def _plain_rate(path: str, keys: list[int], rounds: int, wal: bool) -> float:
    """get+put per second of a plain raw-mode rocksdict loop over 8-byte keys and values."""
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    db = rocksdict.Rdict(path, opts)
    if not wal:
        wo = rocksdict.WriteOptions()
        setattr(wo, "disable_wal", True)  # noqa: B010 - a property; the stub says method
        db.set_write_options(wo)
    kbs = [k.to_bytes(8, "big") for k in keys]
    get, put = db.get, db.put
    t0 = time.perf_counter()
    for _ in range(rounds):
        for kb in kbs:
            v = get(kb)
            put(kb, ((0 if v is None else int.from_bytes(v, "big")) + 1).to_bytes(8, "big"))
    rate = rounds * len(keys) / (time.perf_counter() - t0)
    db.close()
    return rate


def _backend_rate(path: str, keys: list[int], groups: list[int], rounds: int) -> float:
    """ValueState value()+update() per second, one ``commit_local`` per round (epoch)."""
    b = _backend(path)
    state = b.get_partitioned_state(ValueStateDescriptor("v", Types.LONG()))
    value, update, set_kg = state.value, state.update, b.set_current_key_and_group
    t0 = time.perf_counter()
    for epoch in range(rounds):
        for k, kg in zip(keys, groups):
            set_kg(k, kg)
            update((value() or 0) + 1)
        b.commit_local(epoch + 1)
    rate = rounds * len(keys) / (time.perf_counter() - t0)
    b.set_current_key(keys[-1])
    assert value() == rounds
    b.dispose()
    return rate


def bench_rocksdb_ops(scale: float, work: str) -> list[Result]:
    """RocksDB ValueState value()+update() per second vs a plain rocksdict get+put loop.

    The three loops alternate over ``trials`` runs and the best run of each is reported, so
    load from other processes on a shared machine distorts the ratios less.
    """
    n_keys = max(1000, int(100_000 * scale))
    rounds, trials = 5, 3
    keys = list(range(n_keys))
    groups = [assign_to_key_group(k, MAX_P) for k in keys]
    best = {"wal": 0.0, "no_wal": 0.0, "backend": 0.0}
    for t in range(trials):
        best["wal"] = max(
            best["wal"], _plain_rate(os.path.join(work, f"plain-wal-{t}"), keys, rounds, True)
        )
        best["no_wal"] = max(
            best["no_wal"], _plain_rate(os.path.join(work, f"plain-nowal-{t}"), keys, rounds, False)
        )
        best["backend"] = max(
            best["backend"], _backend_rate(os.path.join(work, f"ops-{t}"), keys, groups, rounds)
        )
    return [
        {
            "bench": "value_get_update",
            "impl": "plain_rocksdict_wal_true",
            "ops_per_s": round(best["wal"]),
            "trials": trials,
        },
        {
            "bench": "value_get_update",
            "impl": "plain_rocksdict_wal_false",
            "ops_per_s": round(best["no_wal"]),
            "trials": trials,
        },
        {
            "bench": "value_get_update",
            "impl": "rocksdb_backend_commit_per_round",
            "ops_per_s": round(best["backend"]),
            "trials": trials,
            "ratio_vs_plain_rocksdict_wal": round(best["backend"] / best["wal"], 3),
            "ratio_vs_plain_rocksdict_no_wal": round(best["backend"] / best["no_wal"], 3),
        },
    ]


# -- snapshot / restore of 1 GiB ----------------------------------------------------------


def _load(
    b: RocksDBKeyedStateBackend, n_keys: int, payloads: list[bytes], desc: ValueStateDescriptor
) -> None:
    """Write ``n_keys`` values (``payloads[k % 64] + k``) through the state API, one epoch
    per 64Ki keys."""
    state = b.get_partitioned_state(desc)
    set_kg, update = b.set_current_key_and_group, state.update
    epoch = 0
    for start in range(0, n_keys, _EPOCH_KEYS):
        for k in range(start, min(n_keys, start + _EPOCH_KEYS)):
            set_kg(k, assign_to_key_group(k, MAX_P))
            update(payloads[k % 64] + k.to_bytes(8, "big"))
        epoch += 1
        b.commit_local(epoch)


def _warm_up(directory: str, desc: ValueStateDescriptor) -> None:
    """One tiny snapshot and restore first, so lazy imports are not timed."""
    b = _backend(os.path.join(directory, "a"), incremental=False)
    b.set_current_key(1)
    b.get_partitioned_state(desc).update(b"x")
    b.commit_local(1)
    handle = b.snapshot(1, _factory(os.path.join(directory, "chk")))()
    assert handle is not None
    r = _backend(os.path.join(directory, "b"))
    r.restore([handle])
    r.dispose()
    b.dispose()


def bench_rocksdb_snapshot(scale: float, work: str) -> list[Result]:
    """Full/savepoint/incremental snapshot and restore of N x 1 KiB vs raw sequential I/O."""
    n_keys = max(1000, int(1_048_576 * scale))
    value_size = 1024
    total = n_keys * value_size
    payloads = [os.urandom(value_size - 8) for _ in range(64)]

    def raw_values() -> Any:
        return (payloads[k % 64] + k.to_bytes(8, "big") for k in range(n_keys))

    out: list[Result] = []
    desc = ValueStateDescriptor("v", Types.PRIMITIVE_ARRAY(Types.BYTE()))
    b = _backend(os.path.join(work, "src"))
    t0 = time.perf_counter()
    _load(b, n_keys, payloads, desc)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    b.local_db.db.flush()  # steady state: no flush or compaction left over from the load
    b.local_db.db.compact_range(None, None)
    out.append(
        {
            "bench": "rocksdb_load_via_state_api",
            "keys": n_keys,
            "bytes": total,
            "load_s": round(load_s, 3),
            "flush_and_compact_s": round(time.perf_counter() - t0, 3),
        }
    )

    _warm_up(os.path.join(work, "warm-up"), desc)
    cases = [
        ("full_checkpoint", False, SnapshotType.CHECKPOINT),
        ("savepoint", False, SnapshotType.SAVEPOINT),
        ("incremental_checkpoint", True, SnapshotType.CHECKPOINT),
    ]
    for i, (name, incremental, kind) in enumerate(cases):
        b.incremental = incremental
        factory = _factory(os.path.join(work, f"chk-{name}"))
        # raw I/O of the same bytes right before this case (the machine is shared: pairing
        # the measurements keeps the ratio meaningful when other load comes and goes)
        write_s, cold_s, read_s = _raw_write_read(os.path.join(work, "raw.bin"), raw_values)
        gc.collect()
        t0 = time.perf_counter()
        upload = b.snapshot(i + 1, factory, kind)
        sync_s = time.perf_counter() - t0
        handle = upload()
        assert handle is not None
        files = _files(handle)
        _fsync(files)
        snap_s = time.perf_counter() - t0
        r = _backend(os.path.join(work, f"restore-{name}"))
        gc.collect()
        t0 = time.perf_counter()
        r.restore([handle])
        restore_s = time.perf_counter() - t0
        r.set_current_key(n_keys - 1)
        got = r.get_partitioned_state(desc).value()
        assert got == payloads[(n_keys - 1) % 64] + (n_keys - 1).to_bytes(8, "big")
        r.dispose()
        out.append(
            {
                "bench": "rocksdb_snapshot",
                "kind": name,
                "keys": n_keys,
                "bytes": total,
                "raw_write_s": round(write_s, 3),
                "raw_read_cold_s": round(cold_s, 3),
                "raw_read_warm_s": round(read_s, 3),
                "uploaded_bytes": sum(os.path.getsize(f) for f in files),
                "sync_part_ms": round(sync_s * 1000, 2),
                "snapshot_s": round(snap_s, 3),
                "restore_s": round(restore_s, 3),
                "snapshot_ratio_vs_raw_write": round(write_s / snap_s, 3),
                "restore_ratio_vs_raw_cold_read": round(cold_s / restore_s, 3),
                "restore_ratio_vs_raw_warm_read": round(read_s / restore_s, 3),
                "snapshot_mb_s": round(total / snap_s / 1e6, 1),
                "restore_mb_s": round(total / restore_s / 1e6, 1),
            }
        )
    b.dispose()
    return out


# -- incremental checkpoint size ----------------------------------------------------------


def bench_rocksdb_incremental(scale: float, work: str) -> list[Result]:
    """Uploaded bytes of an incremental checkpoint after touching 1% of the keys."""
    n_keys = max(10_000, int(1_000_000 * scale))
    value_size = 100
    desc = ValueStateDescriptor("v", Types.PRIMITIVE_ARRAY(Types.BYTE()))
    b = _backend(os.path.join(work, "src"))
    _load(b, n_keys, [os.urandom(value_size - 8) for _ in range(64)], desc)
    factory = _factory(os.path.join(work, "chk"))
    first = b.snapshot(1, factory)()
    assert isinstance(first, IncrementalRemoteKeyedStateHandle)
    b.notify_checkpoint_complete(1)
    b.incremental = False
    full = b.snapshot(2, factory)()
    assert full is not None
    b.incremental = True
    state = b.get_partitioned_state(desc)
    touched = n_keys // 100
    step = n_keys // touched
    for k in range(0, n_keys, step)[:touched]:
        b.set_current_key_and_group(k, assign_to_key_group(k, MAX_P))
        state.update(b"\x01" * value_size)
    b.commit_local(10_000)
    t0 = time.perf_counter()
    second = b.snapshot(3, factory)()
    inc_s = time.perf_counter() - t0
    assert isinstance(second, IncrementalRemoteKeyedStateHandle)
    reused = sum(
        1 for p in second.shared_state if type(p.handle).__name__ == "PlaceholderStreamStateHandle"
    )
    b.dispose()
    return [
        {
            "bench": "rocksdb_incremental_size",
            "keys": n_keys,
            "touched_keys": touched,
            "value_bytes": value_size,
            "first_incremental_bytes": first.checkpointed_size,
            "full_key_groups_snapshot_bytes": full.state_size,
            "incremental_after_1pct_bytes": second.checkpointed_size,
            "ratio_vs_first_incremental": round(
                second.checkpointed_size / first.checkpointed_size, 4
            ),
            "ratio_vs_full_snapshot": round(second.checkpointed_size / full.state_size, 4),
            "sst_files_reused": reused,
            "sst_files_uploaded": len(second.shared_state) - reused,
            "incremental_snapshot_s": round(inc_s, 3),
        }
    ]


ROCKSDB_BENCHMARKS: dict[str, Callable[[float, str], list[Result]]] = {
    "rocksdb_ops": bench_rocksdb_ops,
    "rocksdb_snapshot": bench_rocksdb_snapshot,
    "rocksdb_incremental": bench_rocksdb_incremental,
}


def main(argv: list[str] | None = None) -> None:
    """Run only the RocksDB benchmarks (same options as ``bench_state.py``)."""
    import argparse
    import shutil

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--only", action="append", default=None)
    args = parser.parse_args(argv)
    for name, fn in ROCKSDB_BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        work = tempfile.mkdtemp(prefix=f"bench-{name}-")
        try:
            for record in fn(args.scale, work):
                print(json.dumps({"suite": name, **record}), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
