"""Snapshot bytes are decoded within bounds (issue 39, item 2): crafted pickles, Arrow
blocks and compressed changelog entries end in a named error, before anything of them is
built, with the message a user sees.

A case whose failure on an unbounded decoder is a hang or a crash runs in a subprocess with
a time bound, so that it fails fast instead of hanging or killing the test session. Both
keyed backends restore real (crafted) key-group streams, without Spark.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsStateHandle,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory
from sparkpoint.checkpoint.pickle_scan import MAX_DEPTH, scan_pickle
from sparkpoint.clock import SYSTEM_CLOCK
from sparkpoint.common.typeinfo import Types
from sparkpoint.errors import CorruptStateError, RestoreError, StateDecodeError
from sparkpoint.state.backend import KeyedStateBackendParameters
from sparkpoint.state.changelog import MAX_ZSTD_RATIO, encode_entry, encode_kv_changes
from sparkpoint.state.descriptors import ValueStateDescriptor
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.key_groups import assign_to_key_group
from sparkpoint.state.pickling import set_allow_pickle
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.state.serializers import PickleSerializer
from sparkpoint.state.snapshot_format import SCHEMA, SnapshotHeader, write_key_groups_snapshot
from sparkpoint.state.table import RegisteredStateMeta
from tests.fixtures.crafted_pickle import (
    nested_tuples_key,
    pickle_block_with_key,
    shared_tuples_key,
)

ROOT = Path(__file__).resolve().parents[2]
MAX_P = 4
UNTYPED = ValueStateDescriptor("v", Types.PICKLED_BYTE_ARRAY())
BACKENDS = {"heap": HeapKeyedStateBackend, "rocksdb": RocksDBKeyedStateBackend}
BOUND_SECONDS = 60


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    clear_heap_cache()
    yield
    set_allow_pickle(True)
    clear_heap_cache()


def backend(kind: str, directory: str) -> Any:
    params = KeyedStateBackendParameters(
        "job", "op", 0, 1, MAX_P, KeyGroupRange(0, MAX_P - 1), directory, SYSTEM_CLOCK, None
    )
    return BACKENDS[kind](params)


def checkpoint_stream(encoding: str, block: bytes) -> KeyGroupsStateHandle:
    """A checkpoint stream of one untyped value state whose key group 0 holds ``block``."""
    meta = RegisteredStateMeta.from_descriptor(UNTYPED, PickleSerializer())
    header = SnapshotHeader(
        MAX_P, KeyGroupRange(0, MAX_P - 1), (meta,), "checkpoint", "heap", encoding
    )
    out = MemCheckpointStreamFactory().create_checkpoint_state_output_stream()
    handle = write_key_groups_snapshot(out, header, lambda kg: block if kg == 0 else None)
    assert isinstance(handle, KeyGroupsStateHandle)
    return handle


def restore_and_read(kind: str, directory: str, handle: KeyGroupsStateHandle) -> Any:
    """Restore ``handle`` and read key 1 (the heap decodes blocks on first access)."""
    b = backend(kind, directory)
    try:
        b.restore([handle])
        state = b.get_partitioned_state(UNTYPED)
        b.set_current_key(1)
        return state.value()
    finally:
        b.dispose()


def run_bounded(code: str) -> tuple[int, str]:
    """Run ``code`` in a fresh interpreter (this checkout first on the path); returns the
    exit code and what it printed. Fails the test when it runs past ``BOUND_SECONDS``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=BOUND_SECONDS,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"decoding did not end within {BOUND_SECONDS} s (a hang)")
    return done.returncode, done.stdout + done.stderr


# ---- pickles: shared references and nesting -------------------------------------------------

CHILD = """
    from tests.state.test_bounded_decoding import crafted_restore
    crafted_restore({kind!r}, {key!r}, {allow!r}, {tmp!r})
"""


def crafted_restore(kind: str, key: str, allow: bool, tmp: str) -> None:
    """In the child: restore a checkpoint whose pickle block's key is ``key`` and print how
    it ended (the error a user sees)."""
    opcodes = shared_tuples_key(60) if key == "shared" else nested_tuples_key(1_000_000)
    set_allow_pickle(allow)
    handle = checkpoint_stream("pickle", pickle_block_with_key(opcodes))
    try:
        restore_and_read(kind, tmp, handle)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}")
        return
    print("restored")


@pytest.mark.parametrize(
    ("kind", "allow"), [("heap", False), ("rocksdb", True)], ids=["heap-plain-data", "rocksdb"]
)
def test_a_block_of_shared_tuples_is_refused_before_it_is_unpickled(
    kind: str, allow: bool, tmp_path: Path
) -> None:
    """438 bytes, 2**60 values when every memo reference is followed: hashing the key hung
    the first state access."""
    code, out = run_bounded(CHILD.format(kind=kind, key="shared", allow=allow, tmp=str(tmp_path)))
    assert code == 0, out
    assert "CorruptStateError" in out, out
    assert "refers to shared values so often that it holds more than 1048576 values" in out, out
    assert "key group 0" in out, out


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_a_key_nested_a_million_deep_is_refused_not_a_crash(kind: str, tmp_path: Path) -> None:
    """1 MB, one tuple per byte: hashing it overflowed the C stack (SIGSEGV)."""
    code, out = run_bounded(CHILD.format(kind=kind, key="nested", allow=False, tmp=str(tmp_path)))
    assert code == 0, out
    assert "CorruptStateError" in out, out
    assert f"nests values 1000003 levels deep (at most {MAX_DEPTH}" in out, out


def test_what_pickle_dumps_writes_passes_the_scan() -> None:
    shared = ("s", 1)
    values: list[Any] = [
        None,
        True,
        2**100,
        -1.5,
        "é" * 300,
        b"\x00" * 70000,
        bytearray(b"ab"),
        {"a": [1, {2: (3, frozenset({4}))}], "b": {5, 6}},
        [shared] * 1000,
        [[[[[]]]]],
    ]
    deep: list[Any] = []
    for _ in range(400):
        deep = [deep]
    values.append(deep)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    values.append(cyclic)
    for value in values:
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            scan_pickle(pickle.dumps(value, protocol=protocol), "a value")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "the data ends before the STOP opcode"),
        (b"\x80\x05K\x01", "the data ends before the STOP opcode"),
        (b"\x80\x05\xff.", "unknown opcode 0xff"),
        (b"\x80\x05h\x07.", "memo key 7 read before it was written"),
        (b"\x80\x05\x8e" + (2**40).to_bytes(8, "little") + b".", "past the end of the data"),
        (b"\x80\x05a.", "takes a value from an empty stack"),
        (b"\x80\x05e.", "needs a mark the stack does not hold"),
        (b"\x80\x05\x95" + (64).to_bytes(8, "little") + b"K\x01.", "a frame of 64 bytes past"),
    ],
    ids=["empty", "truncated", "opcode", "memo", "declared-length", "stack", "mark", "frame"],
)
def test_malformed_pickles_are_named_corrupt(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptStateError, match="Refusing a block: not a well-formed pickle") as e:
        scan_pickle(data, "a block")
    assert problem in str(e.value)


def test_a_list_filled_after_it_was_nested_is_measured_whole() -> None:
    """Lists appended to after they are inside another (memo references): the nesting is
    only seen on the whole graph."""
    n = MAX_DEPTH + 10
    ops = b"\x80\x04" + b"]\x94" * n + b"0" * (n - 1)
    for k in range(n - 1):
        ops += b"j" + k.to_bytes(4, "little") + b"j" + (k + 1).to_bytes(4, "little") + b"a0"
    with pytest.raises(CorruptStateError, match=f"nests values {n} levels deep"):
        scan_pickle(ops + b".", "a block")


# ---- Arrow blocks ---------------------------------------------------------------------------


def arrow_block_bytes(values: list[bytes], first_key: int = 0) -> bytes:
    """An ``arrow`` block of state 0: key ``first_key + i`` (pickled) -> ``values[i]``."""
    keys = PickleSerializer()
    batch = pa.record_batch(
        [
            pa.array([0] * len(values), pa.uint16()),
            pa.array([keys.serialize(first_key + i) for i in range(len(values))], pa.binary()),
            pa.nulls(len(values), pa.binary()),
            pa.array(values, pa.binary()),
        ],
        schema=SCHEMA,
    )
    return batch.serialize().to_pybytes()  # type: ignore[no-any-return]


def with_value_offsets(block: bytes, offsets: list[int]) -> bytes:
    """``block`` (one value of 7 bytes) with its value column's offsets replaced."""
    body_at = len(block) - pa.ipc.read_message(block).body.size
    original = np.array([0, 7], dtype=np.int32).tobytes()
    at = block.rindex(original, body_at)  # the last binary column's offsets: the values
    return block[:at] + np.array(offsets, dtype=np.int32).tobytes() + block[at + 8 :]


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_arrow_offsets_before_the_buffer_are_refused_not_decoded(kind: str, tmp_path: Path) -> None:
    """Offsets ``[-4096, 7]`` handed 4,103 bytes from before the value buffer (process
    memory) to the decoder."""
    block = with_value_offsets(arrow_block_bytes([b"\x06value!"]), [-4096, 7])
    handle = checkpoint_stream("arrow", block)
    with pytest.raises(CorruptStateError) as e:
        restore_and_read(kind, str(tmp_path / "b"), handle)
    assert str(e.value).startswith("Corrupt keyed state in inline stream ")
    assert str(e.value).endswith(
        ", key group 0: In column 3: Invalid: Offset invariant failure: array starts at "
        "negative offset -4096"
    )


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_a_compressed_arrow_block_is_refused_before_it_is_decompressed(
    kind: str, tmp_path: Path
) -> None:
    """Arrow's IPC buffers may be zstd-compressed, each allocated at the size it declares:
    33 KB expanded to 1 GiB. Snapshots never compress Arrow blocks."""
    batch = pa.ipc.read_record_batch(arrow_block_bytes([b"\x00" * 64] * 8), SCHEMA)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, SCHEMA, options=options) as writer:
        writer.write_batch(batch)
    reader = pa.ipc.MessageReader.open_stream(sink.getvalue())
    reader.read_next_message()  # the schema
    block = reader.read_next_message().serialize().to_pybytes()
    handle = checkpoint_stream("arrow", block)
    with pytest.raises(CorruptStateError) as e:
        restore_and_read(kind, str(tmp_path / "b"), handle)
    assert str(e.value).endswith(
        ", key group 0: compressed buffers (snapshots never compress Arrow blocks)"
    )


def test_a_key_group_declaring_more_bytes_than_its_stream_is_refused(tmp_path: Path) -> None:
    handle = checkpoint_stream("arrow", arrow_block_bytes([b"\x01x"]))
    data = bytearray(handle.delegate.read_all())
    offset = handle.group_range_offsets.offsets[0]
    data[offset + 4 : offset + 8] = (2**32 - 1).to_bytes(4, "big")  # the block's size
    crafted = dataclasses.replace(
        handle, delegate=ByteStreamStateHandle(handle.delegate.handle_name, bytes(data))
    )
    with pytest.raises(CorruptStateError) as e:
        restore_and_read("heap", str(tmp_path / "b"), crafted)
    assert str(e.value) == (
        f"Corrupt keyed state snapshot: key group 0 at offset {offset} declares 4294967295 "
        f"bytes, but the {len(data)}-byte stream ends {len(data) - offset - 8} bytes after "
        "its header"
    )


def test_a_snapshot_header_nested_deep_is_a_restore_error(tmp_path: Path) -> None:
    """JSON nested 100,000 deep in the header raised an uncaught RecursionError."""
    body = b"[" * 100_000 + b"]" * 100_000
    data = b"SPKG" + (1).to_bytes(2, "big") + len(body).to_bytes(4, "big") + body
    handle = checkpoint_stream("arrow", arrow_block_bytes([b"\x01x"]))
    crafted = dataclasses.replace(
        handle,
        group_range_offsets=KeyGroupRangeOffsets(KeyGroupRange(0, MAX_P - 1), (-1,) * MAX_P),
        delegate=ByteStreamStateHandle("deep", data),
    )
    with pytest.raises(RestoreError) as e:
        restore_and_read("heap", str(tmp_path / "b"), crafted)
    assert str(e.value) == (
        "Corrupt keyed state snapshot header: JSON nested more than 100 levels deep (at most 100)"
    )


# ---- changelog entries ----------------------------------------------------------------------


def test_a_changelog_entry_declaring_8_gib_for_1_kib_is_refused_before_allocating(
    tmp_path: Path,
) -> None:
    entry = bytearray(encode_entry("heap", os.urandom(1024)))
    at = 4 + 2 + len(b"heap")
    entry[at : at + 8] = (8 << 30).to_bytes(8, "big")
    b = backend("heap", str(tmp_path / "b"))
    with pytest.raises(CorruptStateError) as e:
        b.apply_changes([bytes(entry)])
    b.dispose()
    compressed = len(entry) - at - 8
    assert str(e.value) == (
        f"Changelog entry #0 is corrupt: it declares 8589934592 uncompressed bytes for "
        f"{compressed} compressed bytes, more than zstd can expand them to "
        f"({MAX_ZSTD_RATIO} per byte)"
    )


def test_a_changelog_stream_with_offsets_outside_its_buffer_is_refused(tmp_path: Path) -> None:
    payload = encode_kv_changes([b"k"], [b"value!!"])
    body_at = len(payload) - 8  # the stream's end-of-stream marker follows the batch
    at = payload.rindex(np.array([0, 7], dtype=np.int32).tobytes(), 0, body_at)
    crafted = payload[:at] + np.array([-4096, 7], dtype=np.int32).tobytes() + payload[at + 8 :]
    b = backend("rocksdb", str(tmp_path / "b"))
    with pytest.raises(CorruptStateError) as e:
        b.apply_changes([encode_entry("rocksdb", crafted)])
    b.dispose()
    assert str(e.value) == (
        "Changelog entry #0 is corrupt: In column 1: Invalid: Offset invariant failure: array "
        "starts at negative offset -4096"
    )


# ---- state files ----------------------------------------------------------------------------

STATE_FILE_CHILD = """
    import hashlib, os, resource, sys
    from sparkpoint.checkpoint.handles import FileStateHandle
    path, kind = {path!r}, {kind!r}
    original = bytes(500)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        with open(path, "wb") as f:
            f.truncate(4 << 30)
    handle = FileStateHandle(path, 500, digest=hashlib.sha256(original).digest())
    try:
        handle.open_input_stream()
    except Exception as exc:
        print(f"{{type(exc).__name__}}: {{exc}}")
    else:
        print("read")
"""


def test_a_state_file_swapped_for_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = str(tmp_path / "state")
    code, out = run_bounded(STATE_FILE_CHILD.format(path=path, kind="fifo"))
    assert (code, out) == (
        0,
        f"StorageError: Refusing to read {path} as a state file of 500 recorded bytes: it is "
        "a FIFO (named pipe); only a regular file is read\n",
    )


def test_a_sparse_4_gib_state_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Recorded as 500 bytes; it was read whole (MemoryError) before its digest failed."""
    path = str(tmp_path / "state")
    code, out = run_bounded(STATE_FILE_CHILD.format(path=path, kind="sparse"))
    assert code == 0, out
    assert out.startswith(
        f"StorageError: Refusing to read {path} as a state file of 500 recorded bytes: it "
        "holds 4294967296 bytes, more than the 501 bytes"
    ), out


# ---- what the fuzz run found ----------------------------------------------------------------


def typed_checkpoint_stream(block: bytes) -> KeyGroupsStateHandle:
    """A checkpoint stream of one INT value state (pickled keys) holding ``block``."""
    meta = RegisteredStateMeta.from_descriptor(TYPED, PickleSerializer())
    header = SnapshotHeader(
        MAX_P, KeyGroupRange(0, MAX_P - 1), (meta,), "checkpoint", "heap", "arrow"
    )
    out = MemCheckpointStreamFactory().create_checkpoint_state_output_stream()
    handle = write_key_groups_snapshot(out, header, lambda kg: block if kg == 0 else None)
    assert isinstance(handle, KeyGroupsStateHandle)
    return handle


TYPED = ValueStateDescriptor("n", Types.INT())


def test_typed_values_their_serializer_cannot_read_are_named_on_restore(tmp_path: Path) -> None:
    """A 3-byte INT: the heap's column decoder raised a bare ValueError."""
    handle = typed_checkpoint_stream(arrow_block_bytes([b"\x00\x00\x01"]))
    b = backend("heap", str(tmp_path / "b"))
    with pytest.raises(CorruptStateError) as e:
        b.restore([handle])
    b.dispose()
    assert str(e.value).endswith(", key group 0: ValueError: INT values must be 4 bytes each")


def test_typed_values_their_serializer_cannot_read_are_named_when_read(tmp_path: Path) -> None:
    """RocksDB keeps restored bytes: the read names the state (a bare struct/ValueError)."""
    key = next(k for k in range(1000) if assign_to_key_group(k, MAX_P) == 0)
    handle = typed_checkpoint_stream(arrow_block_bytes([b"\x00\x00\x01"], first_key=key))
    b = backend("rocksdb", str(tmp_path / "b"))
    b.restore([handle])
    state = b.get_partitioned_state(TYPED)
    b.set_current_key(key)
    with pytest.raises(StateDecodeError) as e:
        state.value()
    b.dispose()
    assert str(e.value) == (
        "State 'n': a value of 3 bytes that its serializer cannot read (ValueError: INT needs "
        "4 bytes, got 3)"
    )


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_a_pickle_block_naming_a_state_the_header_lacks_is_named(kind: str, tmp_path: Path) -> None:
    """State id 128 of 1: an IndexError deep in the heap's lazy decoding."""
    block = pickle.dumps([(128, {1: "x"})], protocol=5)
    handle = checkpoint_stream("pickle", block)
    with pytest.raises(RestoreError, match=r"state id 128 of 1 states"):
        restore_and_read(kind, str(tmp_path / "b"), handle)


def _incremental_checkpoint(tmp_path: Path) -> Any:
    """A real incremental RocksDB checkpoint of 40 keys (SST files in shared/)."""
    from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage

    storage = FileSystemCheckpointStorage(str(tmp_path / "cp"), file_state_size_threshold=0)
    access = storage.create_checkpoint_storage("f" * 32)
    access.initialize_base_locations_for_checkpoint()  # type: ignore[attr-defined]
    params = KeyedStateBackendParameters(
        "job", "op", 0, 1, MAX_P, KeyGroupRange(0, MAX_P - 1), str(tmp_path / "w"), SYSTEM_CLOCK
    )
    b = RocksDBKeyedStateBackend(params, incremental=True)
    state = b.get_partitioned_state(TYPED)
    for key in range(40):
        b.set_current_key(key)
        state.update(key)
    b.commit_local(1)
    handle = b.snapshot(1, access.initialize_location_for_checkpoint(1), "checkpoint")()
    b.dispose()
    return handle


def test_a_corrupt_rocksdb_checkpoint_file_is_named_at_once_not_restored_empty(
    tmp_path: Path,
) -> None:
    """An SST file with a flipped bit (and its digest made right, as a forger would): the
    database failed to open with "block checksum mismatch", which was taken for a lock
    ("block"), waited 10 s and raised StateLostError; a corrupt database was recreated
    empty."""
    handle = _incremental_checkpoint(tmp_path)
    item = max(handle.shared_state, key=lambda i: i.handle.state_size)
    path = Path(item.handle.path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    forged = dataclasses.replace(item.handle, digest=hashlib.sha256(bytes(data)).digest())
    shared = tuple(
        dataclasses.replace(i, handle=forged) if i is item else i for i in handle.shared_state
    )
    b = backend("rocksdb", str(tmp_path / "restore"))
    started = time.monotonic()
    opened = r"^The RocksDB checkpoint restored into .* cannot be opened: Corruption: block"
    with pytest.raises(CorruptStateError, match=opened):
        b.restore([dataclasses.replace(handle, shared_state=shared)])
        state = b.get_partitioned_state(TYPED)
        for key in range(40):
            b.set_current_key(key)
            state.value()
    assert time.monotonic() - started < 5
    b.dispose()
