"""Fuzz the readers of snapshots: mutate a real savepoint's and a real heap checkpoint's
``_metadata`` and state files, and read each mutant through the restore of both keyed
backends, ``sparkpoint savepoint dump`` (``dump_savepoint``) and ``SavepointReader``'s
reading (``Snapshot.load``, ``plan_splits``, ``read_split`` and the columns' decoding, what
its Spark tasks run). No Spark.

Every case ends in one of: ``named`` (a ``SparkpointError``), ``result`` (read without
error), ``unnamed`` (any other exception), ``crash`` (the worker process died) or ``hang``
(it ran past the time bound). The snapshots are built once; cases run in long-lived worker
processes, each case under a time bound (a worker past it is killed and replaced).

Prints one JSON line per case that is not ``named`` or ``result`` and a summary line with
the counts per reader and the time::

    nice -n 10 python scripts/fuzz_snapshots.py --cases 5000 --workers 2 --seed 1
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import selectors
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

MAX_P = 16
PARALLELISM = 2
KEYS = [f"key-{i}" for i in range(40)]
JOB = "f0220000111122223333444455556666"
READERS = ("restore-heap", "restore-rocksdb", "dump", "reader")


# ---- the snapshots ---------------------------------------------------------------------------


def _descriptors() -> list[Any]:
    from sparkpoint.common.typeinfo import Types
    from sparkpoint.state.descriptors import MapStateDescriptor, ValueStateDescriptor

    return [
        ValueStateDescriptor("count", Types.LONG()),
        MapStateDescriptor("seen", Types.STRING(), Types.INT()),
        ValueStateDescriptor("untyped", Types.PICKLED_BYTE_ARRAY()),
    ]


def _backend(kind: str, directory: str, index: int, incremental: bool = False) -> Any:
    from sparkpoint.clock import SYSTEM_CLOCK
    from sparkpoint.state.backend import KeyedStateBackendParameters
    from sparkpoint.state.heap import HeapKeyedStateBackend
    from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
    from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend

    rng = compute_key_group_range_for_operator_index(MAX_P, PARALLELISM, index)
    params = KeyedStateBackendParameters(
        JOB, "count-op", index, PARALLELISM, MAX_P, rng, directory, SYSTEM_CLOCK, None
    )
    if kind == "heap":
        return HeapKeyedStateBackend(params)
    return RocksDBKeyedStateBackend(params, incremental=incremental)


def build_snapshots(base: Path) -> dict[str, str]:
    """A savepoint (typed Arrow blocks), a retained heap checkpoint (pickle blocks) and a
    retained RocksDB checkpoint (incremental: SST files in shared/), each with two subtasks
    of three states and the job master state, state in files."""
    from sparkpoint.checkpoint.metadata import (
        CheckpointMetadata,
        OperatorState,
        OperatorSubtaskState,
    )
    from sparkpoint.checkpoint.metadata.file_format import write_metadata
    from sparkpoint.checkpoint.properties import CheckpointProperties
    from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage
    from sparkpoint.runtime.driver.master_state import JobMasterState
    from sparkpoint.state.backend import SnapshotType
    from sparkpoint.state.key_groups import assign_to_key_group

    storage = FileSystemCheckpointStorage(str(base / "checkpoints"), file_state_size_threshold=0)
    access = storage.create_checkpoint_storage(JOB)
    access.initialize_base_locations_for_checkpoint()  # type: ignore[attr-defined]
    master = JobMasterState(JOB, "fuzz", 7, {"src": {"splits": [[0, 42]]}}, {"op": 5})
    out = {}
    for kind, n in (("savepoint", 3), ("checkpoint", 4), ("rocksdb", 5)):
        if kind == "savepoint":
            location = access.initialize_location_for_savepoint(n, str(base / "savepoints"))
            snapshot_type, props = SnapshotType.SAVEPOINT, CheckpointProperties.for_savepoint()
        else:
            location = access.initialize_location_for_checkpoint(n)
            snapshot_type = SnapshotType.CHECKPOINT
            props = CheckpointProperties.for_checkpoint("RETAIN_ON_CANCELLATION")
        subs = {}
        for index in range(PARALLELISM):
            backend_kind = "rocksdb" if kind == "rocksdb" else "heap"
            local = str(base / f"local-{kind}-{index}")
            b = _backend(backend_kind, local, index, incremental=kind == "rocksdb")
            count, seen, untyped = (b.get_partitioned_state(d) for d in _descriptors())
            for i, key in enumerate(KEYS):
                if b.key_group_range.contains(assign_to_key_group(key, MAX_P)):
                    b.set_current_key(key)
                    count.update(i * 1000)
                    seen.put("first", i)
                    seen.put("second", -i)
                    untyped.update((key, i, [i, None, {"n": float(i)}]))
            if backend_kind == "rocksdb":
                b.commit_local(n)
            handle = b.snapshot(n, location, snapshot_type)()
            b.dispose()
            subs[index] = OperatorSubtaskState(managed_keyed_state=(handle,))
        metadata = CheckpointMetadata(
            n,
            (OperatorState("count-op", PARALLELISM, MAX_P, subs),),
            (master.to_master_state(),),
            props,
        )
        out[kind] = write_metadata(location, metadata).external_pointer
    return out


# ---- the readers -----------------------------------------------------------------------------


def read_restore(pointer: str, kind: str, work: str) -> Any:
    from sparkpoint.checkpoint.discovery import load_pointer
    from sparkpoint.runtime.driver.master_state import JobMasterState
    from sparkpoint.state.key_groups import assign_to_key_group

    metadata, _ = load_pointer(pointer)
    master = JobMasterState.from_metadata(metadata)
    op = metadata.get_operator_state("count-op")
    result: dict[str, Any] = {"epoch": None if master is None else master.epoch}
    if op is None:
        return result
    handles = [h for s in op.subtask_states.values() for h in s.managed_keyed_state]
    for index in range(PARALLELISM):
        b = _backend(kind, os.path.join(work, f"{kind}-{index}"), index)
        try:
            b.restore(handles)
            states = [b.get_partitioned_state(d) for d in _descriptors()]
            for key in KEYS:
                if not b.key_group_range.contains(assign_to_key_group(key, MAX_P)):
                    continue
                b.set_current_key(key)
                result[key] = (
                    states[0].value(),
                    sorted(states[1].items()),
                    states[2].value(),
                )
        finally:
            b.dispose()
    return result


def read_dump(pointer: str, work: str) -> Any:
    import pyarrow.parquet as pq

    from sparkpoint.cli.savepoints import dump_savepoint

    written = dump_savepoint(pointer, os.path.join(work, "dump"))
    return sorted((op, rows, pq.read_table(path).num_rows) for op, rows, path in written)


def read_reader(pointer: str) -> Any:
    from sparkpoint.state_processor.snapshot_reading import (
        Snapshot,
        keyed_handles,
        plan_splits,
        read_split,
    )

    snapshot = Snapshot.load(pointer)
    out = []
    for op in snapshot.metadata.operator_states:
        for split in plan_splits(keyed_handles(op), 3, op.max_parallelism):
            for kg, states in read_split(split):
                for name, (meta, (keys, uks, vals)) in sorted(states.items()):
                    row = [kg, name, [meta.decode_key(k) for k in _list(keys)]]
                    if uks is not None:
                        row.append([meta.decode_user_key(u) for u in _list(uks)])
                    row.append([meta.decode_value(v) for v in _list(vals)])
                    out.append(repr(row))
    return sorted(out)


def _list(column: Any) -> list[Any]:
    return column if isinstance(column, list) else column.to_pylist()


# ---- mutations -------------------------------------------------------------------------------

_INTS = [0, 1, -1, 7, 8, 127, 128, 255, 256, 4096, -4096, 2**31 - 1, -(2**31), 2**32 - 1]
_INTS += [2**33, 2**63 - 1, -(2**63)]


def _pack(value: int, width: int, order: str) -> bytes:
    return (value % (1 << (8 * width))).to_bytes(width, order)


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One random structural or byte mutation of ``data`` and its description."""
    buf = bytearray(data)
    n = len(buf)
    choice = rng.randrange(9)
    at = rng.randrange(max(1, n))
    if choice == 0 and n:
        buf[at] ^= 1 << rng.randrange(8)
        return bytes(buf), f"flip bit at {at}"
    if choice == 1 and n:
        buf[at] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        return bytes(buf), f"set byte {at}"
    if choice in (2, 3) and n:
        width = rng.choice([2, 4, 8])
        order = "big" if choice == 2 else "little"
        value = rng.choice(_INTS)
        buf[at : at + width] = _pack(value, width, order)
        return bytes(buf[: max(n, at + width)]), f"int{width * 8} {order} {value} at {at}"
    if choice == 4:
        cut = rng.randrange(n + 1)
        return bytes(buf[:cut]), f"truncate to {cut}"
    if choice == 5:
        extra = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
        return bytes(buf[:at] + extra + buf[at:]), f"insert {len(extra)} at {at}"
    if choice == 6 and n:
        k = rng.randrange(1, 16)
        return bytes(buf[:at] + buf[at + k :]), f"delete {k} at {at}"
    if choice == 7 and n:
        k = rng.randrange(1, 64)
        chunk = buf[at : at + k]
        return bytes(buf[:at] + chunk * rng.randrange(2, 5) + buf[at + k :]), f"repeat {k} at {at}"
    for _ in range(rng.randrange(2, 9)):
        if buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf), "scramble bytes"


def reframe(data: bytes) -> bytes:
    """``data`` with the ``_metadata`` frame's length and checksums made right again (a
    mutated payload reaches the payload reader)."""
    from sparkpoint.checkpoint.metadata.file_format import HEADER_SIZE, encode_frame

    if len(data) < HEADER_SIZE + 4 or data[:4] != b"SPKM":
        return data
    version = struct.unpack_from(">I", data, 4)[0]
    (length,) = struct.unpack_from(">Q", data, 8)
    payload = data[HEADER_SIZE : min(len(data) - 4, HEADER_SIZE + length)]
    return encode_frame(version, payload)


def redigest(meta: bytes, old: bytes, new: bytes) -> bytes:
    """``meta`` (a complete ``_metadata``) recording ``new``'s size and digest where it
    recorded ``old``'s, re-framed."""
    from sparkpoint.checkpoint.metadata.file_format import HEADER_SIZE, encode_frame

    old_digest = b"\x00\x00\x00\x20" + hashlib.sha256(old).digest()
    new_digest = b"\x00\x00\x00\x20" + hashlib.sha256(new).digest()
    payload = meta[HEADER_SIZE:-4]
    relative = struct.pack(">q", len(old)) + old_digest  # relative: size then digest
    if relative in payload:
        payload = payload.replace(relative, struct.pack(">q", len(new)) + new_digest)
    else:  # absolute: size, path, digest
        at = payload.find(old_digest)
        if at < 0:
            return meta
        payload = payload[:at] + new_digest + payload[at + len(old_digest) :]
        size = struct.pack(">q", len(old))
        for start in range(at - 1, -1, -1):  # the size nearest before the path
            if payload[start : start + 8] == size:
                payload = payload[:start] + struct.pack(">q", len(new)) + payload[start + 8 :]
                break
    return encode_frame(struct.unpack_from(">I", meta, 4)[0], payload)


def _state_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name != "_metadata")


def apply_case(case: int, seed: int, snapshots: dict[str, str], work: Path) -> tuple[str, str]:
    """Copy a snapshot into ``work`` and mutate it; returns its pointer and what was done."""
    rng = random.Random(seed * 1_000_003 + case)
    kind = rng.choice(sorted(snapshots))
    source = Path(snapshots[kind])
    if kind == "savepoint":  # self-contained, relative paths
        target = work / source.name
        shutil.copytree(source, target, symlinks=True)
        files = _state_files(target)
    else:  # the job's directory (shared/ too), with the absolute paths pointed at the copy
        job = work / source.parent.name
        shutil.copytree(source.parent, job, symlinks=True)
        target = job / source.name
        meta = (target / "_metadata").read_bytes()
        (target / "_metadata").write_bytes(_retarget(meta, str(source.parent), str(job)))
        files = _state_files(target) + _state_files(job / "shared")
    meta_path = target / "_metadata"
    what = rng.random()
    if what < 0.4:
        data, how = mutate(meta_path.read_bytes(), rng)
        if rng.random() < 0.75:
            data, how = reframe(data), how + ", reframed"
        meta_path.write_bytes(data)
        return str(target), f"{kind} _metadata: {how}"
    victim = rng.choice(files)
    if what < 0.46:
        return str(target), f"{kind} {victim.name}: " + _replace_file(victim, rng)
    old = victim.read_bytes()
    new, how = mutate(old, rng)
    for _ in range(rng.randrange(3)):
        new, more = mutate(new, rng)
        how += f"; {more}"
    victim.write_bytes(new)
    if rng.random() < 0.8:  # most with the digest made right: the decoders see the bytes
        meta_path.write_bytes(redigest(meta_path.read_bytes(), old, new))
        how += ", digest updated"
    return str(target), f"{kind} {victim.name}: {how}"


def _retarget(meta: bytes, old: str, new: str) -> bytes:
    """``meta`` with every path under ``old`` moved under ``new`` (paths are u32 length +
    UTF-8 in the payload), re-framed."""
    from sparkpoint.checkpoint.metadata.file_format import HEADER_SIZE, encode_frame

    payload = meta[HEADER_SIZE:-4]
    out = bytearray()
    pos = 0
    needle = old.encode()
    while (at := payload.find(needle, pos)) >= 0:
        start = at - 4
        (length,) = struct.unpack_from(">I", payload, start)
        replaced = payload[at : at + length].replace(needle, new.encode(), 1)
        out += payload[pos:start] + struct.pack(">I", len(replaced)) + replaced
        pos = at + length
    out += payload[pos:]
    return encode_frame(struct.unpack_from(">I", meta, 4)[0], bytes(out))


def _replace_file(victim: Path, rng: random.Random) -> str:
    size = victim.stat().st_size
    victim.unlink()
    how = rng.choice(["fifo", "sparse", "directory", "symlink", "empty", "missing"])
    if how == "fifo":
        os.mkfifo(victim)
    elif how == "sparse":
        with open(victim, "wb") as f:
            f.truncate(4 << 30)
    elif how == "directory":
        victim.mkdir()
    elif how == "symlink":
        victim.symlink_to("/dev/zero")
    elif how == "empty":
        victim.write_bytes(b"")
    return f"replaced ({size} bytes) by {how}"


# ---- the worker ------------------------------------------------------------------------------


class Hung(BaseException):
    """A reader ran past its time bound (raised by the alarm, caught by nothing else)."""


def _classify(fn: Any, baseline: Any, bound: int) -> tuple[str, str]:
    import signal

    from sparkpoint.errors import SparkpointError

    def alarm(signum: int, frame: Any) -> None:
        raise Hung()

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(bound)
    try:
        got = fn()
    except Hung:
        return "hang", "interrupted by the time bound"
    except SparkpointError as exc:
        return "named", f"{type(exc).__name__}: {str(exc)[:300]}"
    except Exception as exc:
        return "unnamed", f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        signal.alarm(0)
    return "result", "same as the original" if got == baseline else "differs from the original"


def _runs(pointer: str, tmp: str) -> dict[str, Any]:
    return {
        "restore-heap": lambda: read_restore(pointer, "heap", tmp),
        "restore-rocksdb": lambda: read_restore(pointer, "rocksdb", tmp),
        "dump": lambda: read_dump(pointer, tmp),
        "reader": lambda: read_reader(pointer),
    }


def _baseline(run: Any) -> Any:
    """What a reader returns on the original, or the class of the error it refuses it with
    (a heap backend refuses an incremental RocksDB checkpoint)."""
    from sparkpoint.errors import SparkpointError

    try:
        return run()
    except SparkpointError as exc:
        return f"refused: {type(exc).__name__}"


def worker(seed: int, snapshots: dict[str, str], bound: int) -> None:
    """Read case numbers on stdin, answer one JSON line per case on stdout."""
    from sparkpoint.state.heap import clear_heap_cache

    baselines: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="fuzz-base-") as tmp:
        for kind, pointer in snapshots.items():
            baselines[kind] = {name: _baseline(run) for name, run in _runs(pointer, tmp).items()}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = int(line)
        with tempfile.TemporaryDirectory(prefix="fuzz-case-") as tmp:
            work = Path(tmp)
            pointer, how = apply_case(case, seed, snapshots, work / "snap")
            base = baselines[how.split()[0]]
            runs = _runs(pointer, tmp)
            out: dict[str, Any] = {"case": case, "mutation": how}
            for name, fn in runs.items():
                clear_heap_cache()
                out[name] = _classify(fn, base[name], bound)
            print(json.dumps(out), flush=True)


# ---- the driver ------------------------------------------------------------------------------


class Worker:
    def __init__(self, args: argparse.Namespace, snapshots: dict[str, str]) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", "--seed", str(args.seed), "--bound",
             str(args.bound), "--snapshots", json.dumps(snapshots)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )  # fmt: skip
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready:
            raise RuntimeError("a fuzz worker could not read the original snapshots")
        self.case: int | None = None
        self.started = 0.0

    def send(self, case: int) -> None:
        assert self.proc.stdin is not None
        self.case, self.started = case, time.monotonic()
        self.proc.stdin.write(f"{case}\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()


def drive(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="fuzz-snapshots-"))
    try:
        snapshots = build_snapshots(base)
        counts: dict[str, Counter[str]] = {r: Counter() for r in READERS}
        results: Counter[str] = Counter()
        todo = list(range(args.cases))
        todo.reverse()
        workers = [Worker(args, snapshots) for _ in range(args.workers)]
        sel = selectors.DefaultSelector()
        for w in workers:
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)  # type: ignore[arg-type]
            if todo:
                w.send(todo.pop())
        busy = len([w for w in workers if w.case is not None])
        done = 0
        per_case = args.bound * len(READERS) + 30
        while busy:
            for key, _ in sel.select(timeout=1.0):
                w = key.data
                line = w.proc.stdout.readline()
                if line:
                    _count(json.loads(line), counts, results)
                    w.case = None
                    done += 1
                    if done % 250 == 0:
                        print(f"{done} cases, {time.monotonic() - started:.0f} s", file=sys.stderr)
                else:  # the worker died: a crash of this case
                    code = w.proc.wait()
                    _lost(counts, w.case, f"crash (exit {code})", "crash")
                    sel.unregister(w.proc.stdout)
                    w = _replace(workers, w, args, snapshots, sel)
                if todo:
                    w.send(todo.pop())
                elif w.case is None:
                    busy -= 1
            for w in list(workers):
                if w.case is not None and time.monotonic() - w.started > per_case:
                    sel.unregister(w.proc.stdout)
                    w.kill()
                    _lost(counts, w.case, f"no answer within {per_case} s", "hang")
                    w = _replace(workers, w, args, snapshots, sel)
                    if todo:
                        w.send(todo.pop())
                    else:
                        busy -= 1
        for w in workers:
            w.kill()
        return {
            "cases": args.cases,
            "seed": args.seed,
            "per_reader": {r: dict(counts[r]) for r in READERS},
            "results_and_errors": dict(results.most_common()),
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _count(report: dict[str, Any], counts: dict[str, Counter[str]], results: Counter[str]) -> None:
    """Count one case's report (results by whether they equal the original's, named errors
    by class, over all readers); print it when a reader did not end in either."""
    for r in READERS:
        counts[r][report[r][0]] += 1
        if report[r][0] == "result":
            results[report[r][1]] += 1
        elif report[r][0] == "named":
            results[report[r][1].split(":")[0]] += 1  # the error's class
    if any(report[r][0] not in ("named", "result") for r in READERS):
        print(json.dumps(report), flush=True)


def _lost(counts: dict[str, Counter[str]], case: int | None, why: str, kind: str) -> None:
    print(json.dumps({"case": case, kind: why}), flush=True)
    for r in READERS:
        counts[r][kind] += 1


def _replace(
    workers: list[Worker], old: Worker, args: argparse.Namespace, snapshots: dict[str, str],
    sel: selectors.BaseSelector,
) -> Worker:  # fmt: skip
    new = Worker(args, snapshots)
    workers[workers.index(old)] = new
    sel.register(new.proc.stdout, selectors.EVENT_READ, new)  # type: ignore[arg-type]
    return new


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=5000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bound", type=int, default=10, help="seconds per reader and case")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--snapshots", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.seed, json.loads(args.snapshots), args.bound)
        return 0
    summary = drive(args)
    print(json.dumps(summary), flush=True)
    bad = sum(summary["per_reader"][r].get(k, 0) for r in READERS for k in ("crash", "hang"))
    bad += sum(summary["per_reader"][r].get("unnamed", 0) for r in READERS)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
