"""Checkpoint storage benchmark: FsCheckpointStreamFactory throughput and small-state files.

1. Writes ``--size-mib`` of state through ``FsCheckpointStreamFactory`` (in 4 MiB and in
   64 KiB writes) and the same bytes through a plain ``pyarrow.fs.LocalFileSystem``
   stream, alternating the order, ``--repeat`` times; reports the best of each and the
   ratio (the aim is >= 0.9).
2. Takes a checkpoint of 64 subtasks x 2 KiB through ``FileSystemCheckpointStorage`` and
   counts the files it leaves (Flink's inline threshold makes it exactly one: ``_metadata``).

Prints one JSON object per result line. Usage:
``python bench/bench_storage.py [--size-mib 1024] [--repeat 3] [--dir /tmp]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import pyarrow.fs as pafs

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import StreamStateHandle
from sparkpoint.checkpoint.storage import write_metadata_bytes
from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage
from sparkpoint.fs import get_filesystem

MIB = 1024 * 1024


def _write_factory(directory: str, chunk: bytes, count: int) -> int:
    factory = FsCheckpointStreamFactory(get_filesystem(directory), directory, directory)
    stream = factory.create_checkpoint_state_output_stream()
    for _ in range(count):
        stream.write(chunk)
    handle = stream.close_and_get_handle()
    assert handle is not None
    return handle.state_size


def _write_pyarrow(directory: str, chunk: bytes, count: int) -> int:
    with pafs.LocalFileSystem().open_output_stream(os.path.join(directory, "plain.bin")) as out:
        for _ in range(count):
            out.write(chunk)
    return len(chunk) * count


def _timed(fn: Callable[[str, bytes, int], int], base: str, chunk: bytes, count: int) -> float:
    """Seconds taken by one write of ``count`` chunks into a fresh directory."""
    directory = tempfile.mkdtemp(dir=base)
    os.sync()  # write back earlier runs' dirty pages so they do not slow this one
    try:
        start = time.perf_counter()
        written = fn(directory, chunk, count)
        elapsed = time.perf_counter() - start
        assert written == len(chunk) * count, (written, len(chunk) * count)
        return elapsed
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def bench_throughput(base: str, size_mib: int, write_size: int, repeat: int) -> dict[str, object]:
    """Best-of-``repeat`` MiB/s of the factory and of plain pyarrow, order alternating."""
    chunk = os.urandom(write_size)
    count = max(1, size_mib * MIB // write_size)
    total_mib = count * write_size / MIB
    factory_times: list[float] = []
    arrow_times: list[float] = []
    for i in range(repeat):
        order = [(_write_factory, factory_times), (_write_pyarrow, arrow_times)]
        for fn, times in order if i % 2 == 0 else reversed(order):
            times.append(_timed(fn, base, chunk, count))
    factory_rate = total_mib / min(factory_times)
    arrow_rate = total_mib / min(arrow_times)
    return {
        "benchmark": "fs_stream_throughput",
        "size_mib": round(total_mib, 3),
        "write_size_bytes": write_size,
        "repeat": repeat,
        "factory_mib_s": round(factory_rate, 1),
        "pyarrow_mib_s": round(arrow_rate, 1),
        "ratio": round(factory_rate / arrow_rate, 3),
        "factory_seconds": [round(t, 3) for t in factory_times],
        "pyarrow_seconds": [round(t, 3) for t in arrow_times],
    }


def bench_small_state_files(
    base: str, subtasks: int = 64, state_bytes: int = 2048
) -> dict[str, object]:
    """Files left by one checkpoint of ``subtasks`` x ``state_bytes`` (expect 1)."""
    root = tempfile.mkdtemp(dir=base)
    try:
        storage = FileSystemCheckpointStorage(f"{root}/checkpoints").configure({})
        access = storage.create_checkpoint_storage("a1b2c3d4e5f60718293a4b5c6d7e8f90")
        access.initialize_base_locations_for_checkpoint()
        location = access.initialize_location_for_checkpoint(1)
        reference = location.get_location_reference()
        handles: list[StreamStateHandle] = []
        for subtask in range(subtasks):
            factory = access.resolve_checkpoint_storage_location(1, reference)
            stream = factory.create_checkpoint_state_output_stream()
            stream.write(bytes([subtask % 256]) * state_bytes)
            handle = stream.close_and_get_handle()
            assert handle is not None
            handles.append(handle)
        inline = sum(h.as_bytes_if_in_memory() is not None for h in handles)
        payload = b"".join(h.read_all() for h in handles)
        completed = write_metadata_bytes(location, payload)
        files = [
            os.path.relpath(os.path.join(d, f), root)
            for d, _, names in os.walk(root)
            for f in names
        ]
        return {
            "benchmark": "small_state_files",
            "subtasks": subtasks,
            "state_bytes": state_bytes,
            "inline_handles": inline,
            "files": len(files),
            "file_names": sorted(os.path.basename(f) for f in files),
            "metadata_bytes": completed.metadata_handle.state_size,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmarks and print one JSON line per result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="state size per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant (best kept)")
    parser.add_argument("--dir", default=None, help="where to write (default: system temp)")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="sparkpoint-bench-", dir=args.dir)
    try:
        for write_size in (4 * MIB, 64 * 1024):
            print(
                json.dumps(bench_throughput(base, args.size_mib, write_size, args.repeat)),
                flush=True,
            )
        print(json.dumps(bench_small_state_files(base)), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
