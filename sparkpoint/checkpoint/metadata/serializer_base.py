"""The payload codec versions 1 and 2 of ``_metadata`` share: checkpoint id, properties,
master states and every operator's subtask state handles, with Flink's handle type tags.

Integers are big-endian; strings are UTF-8 with a u32 length (``payload_io``). The frame
around the payload is in ``file_format``; what differs between versions is in ``v1`` and
``v2``.
"""

from __future__ import annotations

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    ChangelogStateBackendHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    PlaceholderStreamStateHandle,
    RelativeFileStateHandle,
    StateMetaInfo,
    StreamStateHandle,
    describe_stream,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata.checkpoint_metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.metadata.payload_io import PayloadReader, PayloadWriter
from sparkpoint.checkpoint.metadata.serializer import (
    HandleType,
    MetadataSerializer,
    metadata_format_error,
)
from sparkpoint.checkpoint.paths import SnapshotPaths
from sparkpoint.checkpoint.properties import CheckpointProperties, CheckpointType
from sparkpoint.checkpoint.state_digest import DIGEST_SIZE

__all__ = ["MetadataSerializerBase"]


class MetadataSerializerBase(MetadataSerializer):
    """The payload of versions 1 and 2: checkpoint id, properties, master states, operators
    and every handle type (Flink's MetadataV2V3SerializerBase)."""

    # ---- write -----------------------------------------------------------------------

    def serialize(self, metadata: CheckpointMetadata) -> bytes:
        w = PayloadWriter()
        w.i64(metadata.checkpoint_id)
        self._write_properties(w, metadata.properties)
        w.u32(len(metadata.master_states))
        for ms in metadata.master_states:
            w.text(ms.name)
            w.i32(ms.version)
            w.raw(ms.data)
        w.u32(len(metadata.operator_states))
        for op in metadata.operator_states:
            w.text(op.operator_id)
            w.i32(op.parallelism)
            w.i32(op.max_parallelism)
            self._write_stream_handle(w, op.coordinator_state)
            w.u32(len(op.subtask_states))
            for index, sub in op.subtask_states.items():
                w.i32(index)
                w.u8(1 if sub.finished else 0)
                for keyed in (sub.managed_keyed_state, sub.raw_keyed_state):
                    w.u32(len(keyed))
                    for kh in keyed:
                        self._write_keyed_handle(w, kh)
                for ops in (sub.managed_operator_state, sub.raw_operator_state):
                    w.u32(len(ops))
                    for oh in ops:
                        self._write_operator_handle(w, oh)
        return bytes(w.buf)

    @staticmethod
    def _write_properties(w: PayloadWriter, props: CheckpointProperties | None) -> None:
        if props is None:
            w.u8(0)
            return
        w.u8(1)
        w.u8(int(props.checkpoint_type))
        flags = (
            props.forced,
            props.discard_subsumed,
            props.discard_finished,
            props.discard_cancelled,
            props.discard_failed,
            props.discard_suspended,
            props.unclaimed,
        )
        w.u8(sum(1 << i for i, f in enumerate(flags) if f))

    def _write_stream_handle(self, w: PayloadWriter, h: StreamStateHandle | None) -> None:
        if h is None:
            w.u8(HandleType.NULL)
        elif isinstance(h, ByteStreamStateHandle):
            w.u8(HandleType.BYTE_STREAM)
            w.text(h.handle_name)
            w.raw(h.data)
        elif isinstance(h, RelativeFileStateHandle):
            digest = h.digest is not None
            w.u8(HandleType.RELATIVE_STREAM_WITH_DIGEST if digest else HandleType.RELATIVE_STREAM)
            w.text(h.relative_path)
            w.i64(h.size)
            if h.digest is not None:
                w.raw(h.digest)
        elif isinstance(h, FileStateHandle):
            digest = h.digest is not None
            w.u8(HandleType.FILE_STREAM_WITH_DIGEST if digest else HandleType.FILE_STREAM)
            w.i64(h.size)
            w.text(h.path)
            if h.digest is not None:
                w.raw(h.digest)
        elif isinstance(h, PlaceholderStreamStateHandle):
            w.u8(HandleType.PLACEHOLDER)
            w.text(h.shared_key)
            w.i64(h.size)
        else:
            raise TypeError(f"Cannot serialize stream state handle of type {type(h).__name__}")

    def _write_keyed_handle(self, w: PayloadWriter, h: KeyedStateHandle | None) -> None:
        if h is None:
            w.u8(HandleType.NULL)
        elif isinstance(h, KeyGroupsStateHandle):
            savepoint = isinstance(h, KeyGroupsSavepointStateHandle)
            w.u8(HandleType.SAVEPOINT_KEY_GROUPS if savepoint else HandleType.KEY_GROUPS)
            kgr = h.key_group_range
            w.i32(kgr.start_key_group)
            w.i32(kgr.number_of_key_groups)
            for offset in h.group_range_offsets.offsets:
                w.i64(offset)
            self._write_stream_handle(w, h.delegate)
            if not savepoint:
                w.text(h.state_handle_id)
        elif isinstance(h, IncrementalRemoteKeyedStateHandle):
            w.u8(HandleType.INCREMENTAL_KEY_GROUPS)
            w.i64(h.checkpoint_id)
            w.text(h.backend_identifier)
            w.i32(h.range.start_key_group)
            w.i32(h.range.number_of_key_groups)
            w.i64(h.checkpointed_size)
            self._write_stream_handle(w, h.meta_state_handle)
            for files in (h.shared_state, h.private_state):
                w.u32(len(files))
                for f in files:
                    w.text(f.local_path)
                    self._write_stream_handle(w, f.handle)
            w.text(h.state_handle_id)
        elif isinstance(h, ChangelogStateBackendHandle):
            w.u8(HandleType.CHANGELOG_KEYED)
            w.text(h.backend_identifier)
            w.i32(h.range.start_key_group)
            w.i32(h.range.number_of_key_groups)
            w.i64(h.checkpoint_id)
            w.i64(h.materialization_id)
            w.u32(len(h.materialized))
            for materialized in h.materialized:
                self._write_keyed_handle(w, materialized)
            w.u32(len(h.changelog))
            for entry in h.changelog:
                self._write_stream_handle(w, entry)
            w.u32(h.new_entries)
        else:
            raise TypeError(f"Cannot serialize keyed state handle of type {type(h).__name__}")

    def _write_operator_handle(self, w: PayloadWriter, h: OperatorStateHandle) -> None:
        w.u8(HandleType.PARTITIONABLE_OPERATOR)
        infos = h.state_name_to_partition_offsets
        w.u32(len(infos))
        for name, info in infos.items():
            w.text(name)
            w.u8(int(info.distribution_mode))
            w.u32(len(info.offsets))
            for offset in info.offsets:
                w.i64(offset)
        self._write_stream_handle(w, h.delegate)

    # ---- read ------------------------------------------------------------------------

    def deserialize(
        self, payload: bytes, paths: SnapshotPaths, base_offset: int
    ) -> CheckpointMetadata:
        r = PayloadReader(payload, base_offset, paths.source)
        checkpoint_id = r.i64("checkpoint id")
        properties = self._read_properties(r)
        paths.savepoint = properties is not None and properties.is_savepoint
        masters = []
        for _ in range(r.count("number of master states")):
            name = r.text("master state name")
            version = r.i32("master state version")
            masters.append(MasterState(name, version, r.raw("master state bytes")))
        operators = []
        for _ in range(r.count("number of operators")):
            at = r.offset
            operator_id = r.text("operator id")
            parallelism = r.i32("parallelism")
            max_parallelism = r.i32("max parallelism")
            coordinator = self._read_stream_handle(r, paths)
            if coordinator is not None and not isinstance(coordinator, ByteStreamStateHandle):
                raise r.fail("coordinator state must be inline (a byte-stream handle)", at)
            subtasks: dict[int, OperatorSubtaskState] = {}
            for _ in range(r.count("number of subtask states")):
                index = r.i32("subtask index")
                finished = r.u8("finished flag") == 1
                keyed = [
                    tuple(
                        self._read_keyed_handle(r, paths)
                        for _ in range(r.count("number of keyed handles"))
                    )
                    for _ in range(2)
                ]
                ops = [
                    tuple(
                        self._read_operator_handle(r, paths)
                        for _ in range(r.count("number of operator handles"))
                    )
                    for _ in range(2)
                ]
                subtasks[index] = OperatorSubtaskState(
                    tuple(h for h in keyed[0] if h is not None),
                    tuple(h for h in keyed[1] if h is not None),
                    ops[0],
                    ops[1],
                    finished,
                )
            try:
                operators.append(
                    OperatorState(operator_id, parallelism, max_parallelism, subtasks, coordinator)
                )
            except ValueError as exc:
                raise r.fail(str(exc), at) from None
        if r.pos != len(payload):
            raise r.fail(f"{len(payload) - r.pos} unexpected bytes after the last operator")
        try:
            return CheckpointMetadata(
                checkpoint_id, tuple(operators), tuple(masters), properties, self.version
            )
        except ValueError as exc:
            raise r.fail(str(exc), base_offset) from None

    @staticmethod
    def _read_properties(r: PayloadReader) -> CheckpointProperties | None:
        if r.u8("properties flag") == 0:
            return None
        at = r.offset
        kind = r.u8("checkpoint type")
        try:
            checkpoint_type = CheckpointType(kind)
        except ValueError:
            raise r.fail(f"unknown checkpoint type {kind}", at) from None
        bits = r.u8("property flags")
        flags = [bool(bits & (1 << i)) for i in range(7)]
        return CheckpointProperties(
            flags[0], checkpoint_type, flags[1], flags[2], flags[3], flags[4], flags[5], flags[6]
        )

    def _read_stream_handle(
        self, r: PayloadReader, paths: SnapshotPaths
    ) -> StreamStateHandle | None:
        at = r.offset
        tag = r.u8("stream handle type")
        if tag == HandleType.NULL:
            return None
        if tag == HandleType.BYTE_STREAM:
            name = r.text("byte-stream handle name")
            return ByteStreamStateHandle(name, r.raw("byte-stream handle data"))
        if tag in (HandleType.FILE_STREAM, HandleType.FILE_STREAM_WITH_DIGEST):
            size = self._read_size(r)
            path = paths.check_absolute(r.text("file path"))
            digest = self._read_digest(r, tag == HandleType.FILE_STREAM_WITH_DIGEST, path)
            return FileStateHandle(path, size, digest=digest)
        if tag in (HandleType.RELATIVE_STREAM, HandleType.RELATIVE_STREAM_WITH_DIGEST):
            relative = r.text("relative file path")
            size = self._read_size(r)
            digest = self._read_digest(r, tag == HandleType.RELATIVE_STREAM_WITH_DIGEST, relative)
            if paths.exclusive_dir is None:
                raise metadata_format_error(
                    "missing context",
                    "Cannot deserialize a RelativeFileStateHandle without a context "
                    "(load the checkpoint through its directory or _metadata path)",
                    at,
                    r.source,
                )
            return RelativeFileStateHandle(
                paths.resolve_relative(relative), size, relative, digest=digest
            )
        if tag == HandleType.PLACEHOLDER:
            key = r.text("placeholder key")
            return PlaceholderStreamStateHandle(key, r.i64("placeholder size"))
        raise r.fail(f"unknown stream state handle type {tag}", at)

    @staticmethod
    def _read_size(r: PayloadReader) -> int:
        at = r.offset
        size = r.i64("file size")
        if size < 0:
            raise r.fail(f"negative file size {size}", at)
        return size

    @staticmethod
    def _read_digest(r: PayloadReader, present: bool, path: str) -> bytes | None:
        if not present:
            return None
        at = r.offset
        digest = r.raw("file digest")
        if len(digest) != DIGEST_SIZE:
            raise r.fail(
                f"the digest of state file {path} has {len(digest)} bytes, not {DIGEST_SIZE}", at
            )
        return digest

    @staticmethod
    def _check_offsets(
        r: PayloadReader, offsets: KeyGroupRangeOffsets, delegate: StreamStateHandle, at: int
    ) -> None:
        """Every key-group offset is -1 (empty) or inside the stream, in key-group order."""
        size = delegate.state_size
        previous = -1
        for key_group, offset in offsets.items():
            if offset == -1:
                continue
            problem = None
            if offset < 0:
                problem = "is negative (only -1, an empty key group, is)"
            elif offset >= size:
                problem = f"lies beyond the end of the {size}-byte stream"
            elif offset < previous:
                problem = f"comes before the previous key group's offset {previous}"
            if problem is not None:
                raise r.fail(
                    f"key group {key_group} of state {describe_stream(delegate)}: offset "
                    f"{offset} {problem}",
                    at,
                )
            previous = offset

    def _read_keyed_handle(
        self, r: PayloadReader, paths: SnapshotPaths, materialized: bool = False
    ) -> KeyedStateHandle | None:
        at = r.offset
        tag = r.u8("keyed handle type")
        if tag == HandleType.NULL:
            return None
        if materialized and tag == HandleType.CHANGELOG_KEYED:
            # refused before it is read: changelog handles nested in each other would
            # recurse once per level
            raise r.fail("a changelog handle's materialization must be a snapshot", at)
        if tag in (HandleType.KEY_GROUPS, HandleType.SAVEPOINT_KEY_GROUPS):
            kgr = self._read_range(r)
            offsets = tuple(r.i64("key-group offset") for _ in range(len(kgr)))
            delegate = self._read_stream_handle(r, paths)
            if delegate is None:
                raise r.fail("key-groups handle without a delegate stream", at)
            kgo = KeyGroupRangeOffsets(kgr, offsets)
            self._check_offsets(r, kgo, delegate, at)
            if tag == HandleType.SAVEPOINT_KEY_GROUPS:
                return KeyGroupsSavepointStateHandle(kgo, delegate)
            return KeyGroupsStateHandle(kgo, delegate, r.text("state handle id"))
        if tag == HandleType.INCREMENTAL_KEY_GROUPS:
            checkpoint_id = r.i64("checkpoint id")
            backend_id = r.text("backend identifier")
            kgr = self._read_range(r, with_offsets=False)
            checkpointed_size = r.i64("checkpointed size")
            meta = self._read_stream_handle(r, paths)
            if meta is None:
                raise r.fail("incremental handle without a meta-state handle", at)
            files: list[tuple[HandleAndLocalPath, ...]] = []
            for _ in range(2):
                entries = []
                for _ in range(r.count("number of files")):
                    local = paths.check_local_name(r.text("local path"))
                    handle = self._read_stream_handle(r, paths)
                    if handle is None:
                        raise r.fail(f"file {local!r} has no handle", at)
                    entries.append(HandleAndLocalPath(handle, local))
                files.append(tuple(entries))
            return IncrementalRemoteKeyedStateHandle(
                backend_id,
                kgr,
                checkpoint_id,
                files[0],
                files[1],
                meta,
                checkpointed_size,
                r.text("state handle id"),
            )
        if tag == HandleType.CHANGELOG_KEYED:
            return self._read_changelog_handle(r, paths, at)
        raise r.fail(f"unknown keyed state handle type {tag}", at)

    def _read_changelog_handle(
        self, r: PayloadReader, paths: SnapshotPaths, at: int
    ) -> ChangelogStateBackendHandle:
        backend_id = r.text("backend identifier")
        kgr = self._read_range(r, with_offsets=False)
        checkpoint_id = r.i64("checkpoint id")
        materialization_id = r.i64("materialization id")
        materialized = []
        for _ in range(r.count("number of materialized handles")):
            handle = self._read_keyed_handle(r, paths, materialized=True)
            if handle is None or isinstance(handle, ChangelogStateBackendHandle):
                raise r.fail("a changelog handle's materialization must be a snapshot", at)
            materialized.append(handle)
        entries = []
        for _ in range(r.count("number of changelog entries")):
            entry = self._read_stream_handle(r, paths)
            if entry is None or isinstance(entry, PlaceholderStreamStateHandle):
                raise r.fail("a changelog entry without its bytes", at)
            entries.append(entry)
        new_entries = r.u32("new changelog entries")
        if new_entries > len(entries):
            raise r.fail(f"{new_entries} new changelog entries of {len(entries)}", at)
        return ChangelogStateBackendHandle(
            backend_id,
            kgr,
            checkpoint_id,
            materialization_id,
            tuple(materialized),
            tuple(entries),
            new_entries,
        )

    @staticmethod
    def _read_range(r: PayloadReader, with_offsets: bool = True) -> KeyGroupRange:
        at = r.offset
        start = r.i32("start key group")
        number = r.i32("number of key groups")
        if start < 0 or number < 0:
            raise r.fail(f"invalid key-group range start={start} count={number}", at)
        if with_offsets and number > (len(r.data) - r.pos) // 8:
            raise r.fail(f"{number} key-group offsets exceed the bytes left", at)
        return KeyGroupRange.of(start, start + number - 1)

    def _read_operator_handle(self, r: PayloadReader, paths: SnapshotPaths) -> OperatorStateHandle:
        at = r.offset
        tag = r.u8("operator handle type")
        if tag != HandleType.PARTITIONABLE_OPERATOR:
            raise r.fail(f"unknown operator state handle type {tag}", at)
        infos: dict[str, StateMetaInfo] = {}
        for _ in range(r.count("number of operator states")):
            name = r.text("operator state name")
            mode_at = r.offset
            mode = r.u8("distribution mode")
            try:
                dist = OperatorStateHandle.Mode(mode)
            except ValueError:
                raise r.fail(f"unknown distribution mode {mode}", mode_at) from None
            n = r.count("number of offsets")
            infos[name] = StateMetaInfo(tuple(r.i64("partition offset") for _ in range(n)), dist)
        delegate = self._read_stream_handle(r, paths)
        if delegate is None:
            raise r.fail("operator state handle without a delegate stream", at)
        for name, info in infos.items():
            for offset in info.offsets:
                if not 0 <= offset < delegate.state_size:
                    raise r.fail(
                        f"operator state {name!r} of {describe_stream(delegate)}: offset "
                        f"{offset} lies outside the {delegate.state_size}-byte stream",
                        at,
                    )
        return OperatorStateHandle(infos, delegate)
