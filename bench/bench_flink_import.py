"""What importing a Flink savepoint costs at 1M keys (issue 42): time and peak memory.

Writes a canonical Flink savepoint in the layout a real PyFlink 2.3 savepoint has (the one
under tests/state_processor/flink_savepoints/: a ``Row(pickled key)`` key, a LONG count and
a pickled total as ``python-state-*`` list state, a map of two STRING -> LONG entries), at
parallelism 2 and max parallelism 128, then imports it with ``import_flink_savepoint``.
Prints one JSON line.

    python bench/bench_flink_import.py                 # 1,000,000 keys
    python bench/bench_flink_import.py --keys 10000    # a quick check that it runs

Baseline in the same run: ``unpickle_keys_s``, unpickling the keys alone (the least any
import of pickled keys does); ``read_s`` is the decoding of the Flink files into Python
objects, ``write_s`` the sparkpoint savepoint written from them.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sparkpoint.common import Types
from sparkpoint.datastream.state import MapStateDescriptor, ValueStateDescriptor
from sparkpoint.state_processor.flink import import_flink_savepoint, read_metadata_file
from sparkpoint.state_processor.flink.operator_ids import murmur3_x64_128
from sparkpoint.state_processor.flink.pyflink_state import read_pyflink_keyed_state

STATES = {
    "counter": [
        ValueStateDescriptor("count", Types.LONG()),
        ValueStateDescriptor("total", Types.PICKLED_BYTE_ARRAY()),
        MapStateDescriptor("items", Types.STRING(), Types.LONG()),
    ]
}
_BYTES = (
    "org.apache.flink.api.common.typeutils.base.array."
    "BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot"
)
_WRAPPER = (
    "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
    "$ByteArrayWrapperSerializerSnapshot"
)
_VOID = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
_ROW = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
_LIST = "org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot"
_MAP = "org.apache.flink.api.common.typeutils.base.MapSerializerSnapshot"


def _utf(s: str) -> bytes:
    return struct.pack(">H", len(s)) + s.encode()


def _simple(name: str) -> bytes:
    return _utf(name) + struct.pack(">i", 3)


def _composite(name: str, nested: list[bytes], outer: bytes = b"", outer_version: int = 1) -> bytes:
    return (
        _utf(name)
        + struct.pack(">iii", 3 if name == _ROW else 1, 911108, outer_version)
        + outer
        + struct.pack(">iii", 1333245, 1, len(nested))
        + b"".join(nested)
    )


def _meta(name: str, kind: str, value: bytes) -> bytes:
    out = _utf(name) + struct.pack(">ii", 0, 1) + _utf("KEYED_STATE_TYPE") + _utf(kind)
    out += struct.pack(">i", 2) + _utf("VALUE_SERIALIZER") + struct.pack(">i", 2) + value
    out += _utf("NAMESPACE_SERIALIZER") + struct.pack(">i", 2) + _simple(_VOID)
    return out


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def write_flink_savepoint(path: str, n_keys: int) -> None:
    """The savepoint directory ``path`` with ``n_keys`` keys of keyed_counts.py's state."""
    header = struct.pack(">i", 6) + b"\x00" + struct.pack(">i", 2)
    header += _composite(_ROW, [_simple(_BYTES)], b"\x01", 4)
    header += struct.pack(">h", 3)
    header += _meta("python-state-count", "LIST", _composite(_LIST, [_simple(_BYTES)]))
    header += _meta("python-state-total", "LIST", _composite(_LIST, [_simple(_BYTES)]))
    header += _meta(
        "python-state-items", "MAP", _composite(_MAP, [_simple(_WRAPPER), _simple(_BYTES)])
    )
    os.makedirs(path)
    handles = []
    for sub, (lo, hi) in enumerate([(0, 63), (64, 127)]):
        out = bytearray(header)
        offsets = []
        for kg in range(lo, hi + 1):
            keys = range(kg, n_keys, 128)
            if not keys:
                offsets.append(0)
                continue
            offsets.append(len(out))
            rows = [
                bytes([kg]) + b"\x00" + _b(pickle.dumps(f"user-{i}", 5)) + b"\x00" for i in keys
            ]
            blocks = [
                [(k, _b(struct.pack(">q", i))) for k, i in zip(rows, keys)],
                [(k, _b(_b(pickle.dumps((i, [i % 7]), 4)))) for k, i in zip(rows, keys)],
                [
                    (k + _b(_b(item.encode())), b"\x00" + _b(struct.pack(">q", i % 5)))
                    for k, i in zip(rows, keys)
                    for item in ("apple", "pear")
                ],
            ]
            for sid, entries in enumerate(blocks):
                if sid == 0:
                    out += struct.pack(">h", 0)
                for j, (k, v) in enumerate(entries):
                    if j == len(entries) - 1:
                        k = bytes([k[0] | 0x80]) + k[1:]
                    out += _b(k) + _b(v)
                out += struct.pack(">H", sid + 1 if sid < 2 else 0xFFFF)
        name = f"state-{sub}"
        with open(os.path.join(path, name), "wb") as f:
            f.write(out)
        handle = b"\x07" + struct.pack(">ii", lo, hi - lo + 1)
        handle += b"".join(struct.pack(">q", o) for o in offsets)
        handle += b"\x06" + _utf(name) + struct.pack(">q", len(out))
        handles.append(handle)
    op = _utf("counter") + _utf("counter") + murmur3_x64_128(b"counter")
    op += struct.pack(">ii", 2, 128) + b"\x00" + struct.pack(">i", 2)
    for sub, h in enumerate(handles):
        op += struct.pack(">iii", sub, 0, 0) + h + b"\x00" + struct.pack(">ii", 0, 0)
    meta = struct.pack(">iiqi", 0x4960672D, 6, 1, 0) + struct.pack(">i", 1) + op
    with open(os.path.join(path, "_metadata"), "wb") as f:
        f.write(meta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    opts = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-flink-import-")
    try:
        flink = os.path.join(work, "flink")
        write_flink_savepoint(flink, opts.keys)
        flink_bytes = sum(os.path.getsize(os.path.join(flink, f)) for f in os.listdir(flink))
        keys = [pickle.dumps(f"user-{i}", 5) for i in range(opts.keys)]
        start = time.perf_counter()
        for k in keys:
            pickle.loads(k)
        unpickle_s = time.perf_counter() - start
        del keys
        start = time.perf_counter()
        state = read_pyflink_keyed_state(
            read_metadata_file(flink), "counter", STATES["counter"], "bench"
        )
        read_s = time.perf_counter() - start
        assert len(state.values) == opts.keys
        del state
        start = time.perf_counter()
        import_flink_savepoint(flink, os.path.join(work, "sp"), STATES)
        import_s = time.perf_counter() - start
        print(
            json.dumps(
                {
                    "bench": "flink_import",
                    "keys": opts.keys,
                    "flink_savepoint_bytes": flink_bytes,
                    "unpickle_keys_s": round(unpickle_s, 2),
                    "read_s": round(read_s, 2),
                    "import_s": round(import_s, 2),
                    "write_s": round(import_s - read_s, 2),
                    "peak_rss_mb": round(
                        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
                    ),
                }
            ),
            flush=True,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
