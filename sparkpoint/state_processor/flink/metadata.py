"""Reading a Flink savepoint's ``_metadata`` (format versions 3 to 7), pure Python.

Layout (Flink's ``Checkpoints`` and ``MetadataV2V3SerializerBase`` and its subclasses):
the magic number ``0x4960672d``, the format version, the checkpoint id, the master states,
then the operator states: from version 5 on each starts with the operator's name and uid
(empty when unset), then the operator id (two longs), parallelism, max parallelism, the
coordinator state, and per subtask its managed/raw operator and keyed state handles and
its channel state. From version 4 on a Java-serialized ``CheckpointProperties`` trails
(not read: nothing of it is needed, and Java serialization is not decoded here). Version 7
adds an optional checkpoint reference id after each subtask.

Relative file handles are resolved inside the savepoint directory only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError

__all__ = [
    "METADATA_MAGIC",
    "SUPPORTED_VERSIONS",
    "ByteStreamHandle",
    "FileHandle",
    "FlinkMetadata",
    "FlinkOperatorState",
    "FlinkSubtaskState",
    "KeyGroupsHandle",
    "OperatorStateHandle",
    "read_metadata",
    "read_metadata_file",
]

METADATA_MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)  # as a signed int
SUPPORTED_VERSIONS = (3, 4, 5, 6, 7)

# Handle type bytes of MetadataV2V3SerializerBase.
NULL_HANDLE = 0
BYTE_STREAM_HANDLE = 1
FILE_STREAM_HANDLE = 2
KEY_GROUPS_HANDLE = 3
PARTITIONABLE_OPERATOR_STATE_HANDLE = 4
INCREMENTAL_KEY_GROUPS_HANDLE = 5
RELATIVE_STREAM_HANDLE = 6
SAVEPOINT_KEY_GROUPS_HANDLE = 7
CHANGELOG_HANDLES = (8, 9, 10, 13, 14)
INCREMENTAL_KEY_GROUPS_HANDLE_V2 = 11
KEY_GROUPS_HANDLE_V2 = 12


@dataclass(frozen=True)
class ByteStreamHandle:
    """State bytes stored inside ``_metadata``."""

    name: str
    data: bytes

    def read(self) -> bytes:
        return self.data


@dataclass(frozen=True)
class FileHandle:
    """State bytes in a file; ``path`` is local and checked to lie inside the savepoint."""

    path: str
    size: int

    def read(self) -> bytes:
        """The file's bytes, refused unless there are exactly as many as ``_metadata`` says."""
        try:
            with open(self.path, "rb") as f:
                data = f.read(self.size + 1)
        except OSError as e:
            raise FlinkFormatError(f"state file {self.path}: {e}") from e
        if len(data) != self.size:
            raise FlinkFormatError(
                f"state file {self.path}: {len(data)}{'+' if len(data) > self.size else ''} "
                f"bytes where _metadata records {self.size} (truncated or replaced)"
            )
        return data


StreamHandle = ByteStreamHandle | FileHandle


@dataclass(frozen=True)
class KeyGroupsHandle:
    """Keyed state of one subtask in canonical (or full) format: one stream with an offset
    per key group of ``[start, start + len(offsets))``."""

    start_key_group: int
    offsets: tuple[int, ...]
    stream: StreamHandle
    savepoint: bool  # KeyGroupsSavepointStateHandle: the canonical savepoint format


@dataclass(frozen=True)
class OperatorStateHandle:
    """Operator (non-keyed) state: per state name its distribution mode and offsets."""

    states: dict[str, tuple[int, tuple[int, ...]]]
    stream: StreamHandle | None


@dataclass(frozen=True)
class FlinkSubtaskState:
    index: int
    managed_operator_state: OperatorStateHandle | None = None
    raw_operator_state: OperatorStateHandle | None = None
    managed_keyed_state: KeyGroupsHandle | None = None
    raw_keyed_state: KeyGroupsHandle | None = None


@dataclass(frozen=True)
class FlinkOperatorState:
    operator_id: str  # 32 hex digits
    name: str | None
    uid: str | None
    parallelism: int
    max_parallelism: int
    subtasks: tuple[FlinkSubtaskState, ...] = field(default=())
    fully_finished: bool = False


@dataclass(frozen=True)
class FlinkMetadata:
    version: int
    checkpoint_id: int
    master_states: tuple[tuple[str, int, bytes], ...]  # (name, version, bytes)
    operators: tuple[FlinkOperatorState, ...]

    def operator(self, uid: str) -> FlinkOperatorState | None:
        """The operator of ``uid`` (found by its stored uid, else by the uid's hash)."""
        from sparkpoint.state_processor.flink.operator_ids import operator_id_of_uid

        oid = operator_id_of_uid(uid)
        for op in self.operators:
            if op.uid == uid or op.operator_id == oid:
                return op
        return None


class _Parser:
    def __init__(self, data: bytes, what: str, directory: str | None) -> None:
        self.inp = DataInput(data, what)
        self.directory = directory
        self.version = 0

    def fail(self, message: str) -> FlinkFormatError:
        return self.inp.fail(message)

    def parse(self) -> FlinkMetadata:
        inp = self.inp
        magic = inp.i32()
        if magic != METADATA_MAGIC:
            raise FlinkFormatError(
                f"{inp.what}: not a Flink _metadata file (magic number {magic & 0xFFFFFFFF:#010x}, "
                f"expected {METADATA_MAGIC:#010x})"
            )
        self.version = inp.i32()
        if self.version not in SUPPORTED_VERSIONS:
            raise FlinkFormatError(
                f"{inp.what}: _metadata format version {self.version} is not supported; "
                f"this reader knows versions {', '.join(map(str, SUPPORTED_VERSIONS))} "
                "(Flink 1.11 to 2.3)"
            )
        checkpoint_id = inp.i64()
        if checkpoint_id < 0:
            raise self.fail(f"invalid checkpoint id {checkpoint_id}")
        masters = tuple(self.master_state() for _ in range(inp.count("master states", 8)))
        ops = tuple(self.operator() for _ in range(inp.count("operator states", 20)))
        # Version 4 on: a Java-serialized CheckpointProperties follows (not needed here).
        if self.version < 4 and inp.remaining:
            raise self.fail(f"{inp.remaining} trailing bytes")
        return FlinkMetadata(self.version, checkpoint_id, masters, ops)

    def master_state(self) -> tuple[str, int, bytes]:
        inp = self.inp
        if inp.i32() != MASTER_STATE_MAGIC:
            raise self.fail("bad magic number of a master state")
        n = inp.i32()
        if n <= 0 or n > inp.remaining:
            raise self.fail(f"master state length {n} with {inp.remaining} bytes left")
        sub = DataInput(inp.data, inp.what, inp.pos, inp.pos + n)
        inp.pos += n
        version = sub.i32()
        name = sub.utf()
        payload = sub.sized_bytes(f"master state {name!r}")
        if sub.remaining:
            raise sub.fail(f"trailing bytes in master state {name!r}")
        return name, version, payload

    def operator(self) -> FlinkOperatorState:
        inp = self.inp
        name = uid = None
        if self.version >= 5:
            name = inp.utf() or None
            uid = inp.utf() or None
        lower = inp.i64() & 0xFFFFFFFFFFFFFFFF
        upper = inp.i64() & 0xFFFFFFFFFFFFFFFF
        operator_id = lower.to_bytes(8, "big").hex() + upper.to_bytes(8, "big").hex()
        parallelism = inp.i32()
        max_parallelism = inp.i32()
        if parallelism <= 0 or max_parallelism <= 0 or max_parallelism > 32768:
            raise self.fail(
                f"operator {operator_id}: parallelism {parallelism}, max parallelism "
                f"{max_parallelism}"
            )
        coordinator = self.stream_handle()
        if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):
            raise self.fail(f"operator {operator_id}: coordinator state is not inline bytes")
        n = inp.i32()
        if n < 0:
            return FlinkOperatorState(
                operator_id, name, uid, parallelism, max_parallelism, fully_finished=True
            )
        if n > parallelism or n * 4 > inp.remaining:
            raise self.fail(
                f"operator {operator_id}: {n} subtask states, parallelism {parallelism}"
            )
        subtasks = []
        for _ in range(n):
            index = inp.i32()
            if index < 0:  # a finished subtask: no state
                continue
            if index >= parallelism:
                raise self.fail(f"operator {operator_id}: subtask {index} of {parallelism}")
            subtasks.append(self.subtask(index, operator_id))
        return FlinkOperatorState(
            operator_id, name, uid, parallelism, max_parallelism, tuple(subtasks)
        )

    def subtask(self, index: int, operator_id: str) -> FlinkSubtaskState:
        inp = self.inp
        managed_op = self.operator_state_handle() if inp.i32() != 0 else None
        raw_op = self.operator_state_handle() if inp.i32() != 0 else None
        managed_keyed = self.keyed_handle(operator_id)
        raw_keyed = self.keyed_handle(operator_id)
        for what in ("input channel", "result subpartition"):
            if inp.i32() != 0:
                raise UnsupportedFlinkStateError(
                    f"{inp.what}: operator {operator_id} subtask {index} has {what} state "
                    "(an unaligned checkpoint); only savepoints can be imported"
                )
        if self.version >= 7 and inp.byte() == 1:
            inp.i64()  # the regional checkpoint's reference id
        return FlinkSubtaskState(index, managed_op, raw_op, managed_keyed, raw_keyed)

    def keyed_handle(self, operator_id: str) -> KeyGroupsHandle | None:
        inp = self.inp
        kind = inp.signed_byte()
        if kind == NULL_HANDLE:
            return None
        if kind in (KEY_GROUPS_HANDLE, KEY_GROUPS_HANDLE_V2, SAVEPOINT_KEY_GROUPS_HANDLE):
            start = inp.i32()
            n = inp.i32()
            if start < 0 or n <= 0 or n > 32768 or n * 8 > inp.remaining:
                raise self.fail(f"key group range start {start}, {n} key groups")
            offsets = tuple(inp.i64() for _ in range(n))
            stream = self.stream_handle()
            if stream is None:
                raise self.fail("a key groups handle without a stream")
            if kind == KEY_GROUPS_HANDLE_V2:
                inp.utf()  # the state handle id
            return KeyGroupsHandle(start, offsets, stream, kind == SAVEPOINT_KEY_GROUPS_HANDLE)
        if kind in (INCREMENTAL_KEY_GROUPS_HANDLE, INCREMENTAL_KEY_GROUPS_HANDLE_V2):
            raise UnsupportedFlinkStateError(
                f"{inp.what}: operator {operator_id} has incremental RocksDB state (a "
                "checkpoint or a native-format savepoint); take a canonical savepoint "
                "(flink savepoint --type canonical, the default) and import that"
            )
        if kind in CHANGELOG_HANDLES:
            raise UnsupportedFlinkStateError(
                f"{inp.what}: operator {operator_id} has changelog state handles; take a "
                "canonical savepoint and import that"
            )
        raise self.fail(f"unknown keyed state handle type {kind}")

    def operator_state_handle(self) -> OperatorStateHandle | None:
        inp = self.inp
        kind = inp.signed_byte()
        if kind == NULL_HANDLE:
            return None
        if kind != PARTITIONABLE_OPERATOR_STATE_HANDLE:
            raise self.fail(f"unknown operator state handle type {kind}")
        states: dict[str, tuple[int, tuple[int, ...]]] = {}
        for _ in range(inp.count("operator state names", 7)):
            name = inp.utf()
            mode = inp.signed_byte()
            if mode not in (0, 1, 2):
                raise self.fail(f"operator state {name!r}: unknown distribution mode {mode}")
            k = inp.count(f"offsets of operator state {name!r}", 8)
            states[name] = (mode, tuple(inp.i64() for _ in range(k)))
        return OperatorStateHandle(states, self.stream_handle())

    def stream_handle(self) -> StreamHandle | None:
        inp = self.inp
        kind = inp.signed_byte()
        if kind == NULL_HANDLE:
            return None
        if kind == BYTE_STREAM_HANDLE:
            name = inp.utf()
            return ByteStreamHandle(name, inp.sized_bytes(f"inline state {name!r}"))
        if kind == RELATIVE_STREAM_HANDLE:
            relative = inp.utf()
            size = inp.i64()
            return FileHandle(self.resolve(relative), self.check_size(size))
        if kind == FILE_STREAM_HANDLE:
            size = inp.i64()
            path = inp.utf()
            return FileHandle(self.resolve(path), self.check_size(size))
        raise self.fail(f"unknown stream state handle type {kind}")

    def check_size(self, size: int) -> int:
        if size < 0:
            raise self.fail(f"negative state size {size}")
        return size

    def resolve(self, path: str) -> str:
        """A state file's local path, refused unless inside the savepoint directory."""
        if self.directory is None:
            raise self.fail(f"a state file {path!r} without a savepoint directory to resolve it")
        for scheme in ("file://", "file:"):
            if path.startswith(scheme):
                path = path[len(scheme) :]
                break
        if "://" in path:
            raise UnsupportedFlinkStateError(
                f"{self.inp.what}: state file {path!r} is not local; copy the savepoint "
                "directory to a local path and import it from there"
            )
        base = os.path.realpath(self.directory)
        target = os.path.realpath(os.path.join(base, path))  # an absolute path stays as it is
        if not target.startswith(base + os.sep):
            raise FlinkFormatError(
                f"{self.inp.what}: state file {path!r} lies outside the savepoint directory {base}"
            )
        return target


def read_metadata(data: bytes, what: str, directory: str | None = None) -> FlinkMetadata:
    """Parse the bytes of a ``_metadata`` file (``what`` names it in errors)."""
    return _Parser(data, what, directory).parse()


def read_metadata_file(savepoint: str) -> FlinkMetadata:
    """Parse ``<savepoint>/_metadata`` (``savepoint`` a directory or the file itself)."""
    path = savepoint
    if os.path.isdir(path):
        path = os.path.join(path, "_metadata")
    if not os.path.isfile(path):
        raise FlinkFormatError(f"{path}: no such Flink _metadata file")
    with open(path, "rb") as f:
        data = f.read()
    return read_metadata(data, path, os.path.dirname(os.path.abspath(path)))
