"""The ``_metadata`` format: round trips of every handle, and detected corruption."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from ckpt_metadata_samples import (
    EXCLUSIVE_DIR,
    every_handle_subtask,
    key_groups_handle,
    sample_metadata,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    ChangelogStateBackendHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupRangeOffsets,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    PlaceholderStreamStateHandle,
    RelativeFileStateHandle,
    StateMetaInfo,
    StreamStateHandle,
)
from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.checkpoint.metadata.file_format import (
    HEADER_SIZE,
    MAGIC,
    encode_frame,
    load_checkpoint_metadata,
    store_checkpoint_metadata,
)
from sparkpoint.checkpoint.metadata.serializers import CURRENT_VERSION, MetadataSerializers
from sparkpoint.checkpoint.metadata.v1 import MetadataV1Serializer
from sparkpoint.checkpoint.metadata.v2 import MetadataV2Serializer
from sparkpoint.checkpoint.properties import CheckpointProperties, CheckpointType
from sparkpoint.errors import MetadataFormatError, UnsafeStatePathError

SOURCE = "/data/chk/job/chk-7/_metadata"


def _round_trip(md: CheckpointMetadata) -> CheckpointMetadata:
    data = store_checkpoint_metadata(md)
    loaded = load_checkpoint_metadata(data, EXCLUSIVE_DIR, SOURCE)
    assert store_checkpoint_metadata(loaded) == data
    return loaded


def _stream_bytes(h: StreamStateHandle | None) -> object:
    if isinstance(h, ByteStreamStateHandle):
        return ("bytes", h.handle_name, h.data)
    if isinstance(h, RelativeFileStateHandle):
        return ("relative", h.path, h.size, h.relative_path)
    if isinstance(h, FileStateHandle):
        return ("file", h.path, h.size)
    if isinstance(h, PlaceholderStreamStateHandle):
        return ("placeholder", h.shared_key, h.size)
    return h


def test_frame_layout() -> None:
    data = store_checkpoint_metadata(CheckpointMetadata(3))
    assert data[:4] == MAGIC == b"SPKM"
    version, length = struct.unpack(">IQ", data[4:16])
    assert version == CURRENT_VERSION == 2
    assert len(data) == HEADER_SIZE + length + 4
    assert struct.unpack(">I", data[16:20])[0] == zlib.crc32(data[:16])
    assert struct.unpack(">I", data[-4:])[0] == zlib.crc32(data[20:-4])


def test_round_trip_sample_with_every_handle_type() -> None:
    md = sample_metadata()
    loaded = _round_trip(md)
    assert loaded == md
    assert loaded.checkpoint_id == 7
    assert loaded.properties == CheckpointProperties.RETAIN_ON_CANCELLATION
    assert [op.operator_id for op in loaded.operator_states] == ["source-1", "keyed-agg"]
    source = loaded.operator_states[0]
    assert source.coordinator_state is not None
    assert source.coordinator_state.data == b'{"splits":[1,2]}'
    assert list(source.subtask_states) == [0, 1]
    assert source.subtask_states[0].finished is True
    assert not source.subtask_states[0].has_state()
    assert loaded.get_master_state("source-positions").to_json() == {  # type: ignore[union-attr]
        "kafka": {"0": 17, "1": 4}
    }
    assert loaded.get_master_state("hook") == MasterState("hook", 3, b"\x00\x01\x02")
    assert loaded.state_size == md.state_size


def test_each_handle_field_survives() -> None:
    sub = _round_trip(sample_metadata()).operator_states[0].subtask_states[1]
    original = every_handle_subtask()
    kg, inc = sub.managed_keyed_state
    okg, oinc = original.managed_keyed_state
    assert isinstance(kg, KeyGroupsStateHandle) and isinstance(okg, KeyGroupsStateHandle)
    assert kg.group_range_offsets == okg.group_range_offsets
    assert kg.state_handle_id == "id-0"
    assert _stream_bytes(kg.delegate) == _stream_bytes(okg.delegate)
    assert isinstance(inc, IncrementalRemoteKeyedStateHandle)
    assert isinstance(oinc, IncrementalRemoteKeyedStateHandle)
    assert (inc.backend_identifier, inc.range, inc.checkpoint_id, inc.checkpointed_size) == (
        "backend-uuid",
        KeyGroupRange(6, 9),
        7,
        1234,
    )
    assert inc.state_handle_id == "inc-1"
    assert [(f.local_path, _stream_bytes(f.handle)) for f in inc.shared_state] == [
        ("000001.sst", ("file", "/data/chk/job/shared/a.sst", 1000)),
        ("000002.sst", ("placeholder", "/data/chk/job/shared/b.sst", 2000)),
    ]
    assert [(f.local_path, _stream_bytes(f.handle)) for f in inc.private_state] == [
        ("MANIFEST-000003", ("bytes", "MANIFEST", b"manifest")),
    ]
    assert _stream_bytes(inc.meta_state_handle) == ("bytes", "meta", b"\x00meta\xff")
    sp, kg_file = sub.raw_keyed_state
    assert type(sp) is KeyGroupsSavepointStateHandle
    assert sp.state_handle_id == ""
    assert _stream_bytes(sp.delegate) == ("relative", f"{EXCLUSIVE_DIR}/sp-file", 99, "sp-file")
    assert _stream_bytes(kg_file.delegate) == ("file", f"{EXCLUSIVE_DIR}/kg-10-10", 4096)  # type: ignore[attr-defined]
    (op,) = sub.managed_operator_state
    assert dict(op.state_name_to_partition_offsets) == {
        "offsets": StateMetaInfo((0, 8, 16), OperatorStateHandle.Mode.SPLIT_DISTRIBUTE),
        "union": StateMetaInfo((24,), OperatorStateHandle.Mode.UNION),
        "bcast": StateMetaInfo((), OperatorStateHandle.Mode.BROADCAST),
    }
    assert _stream_bytes(op.delegate) == ("file", "/data/chk/job/chk-7/op-file", 321)
    (raw_op,) = sub.raw_operator_state
    assert _stream_bytes(raw_op.delegate) == ("bytes", "raw-op", b"")


def _relative_only() -> CheckpointMetadata:
    """A savepoint whose one file is recorded relative to its directory (relocatable)."""
    savepoint = every_handle_subtask().raw_keyed_state[0]
    return CheckpointMetadata(
        3, (OperatorState("op", 1, 128, {0: OperatorSubtaskState((), (savepoint,))}),)
    )


def test_relative_handle_resolves_against_loading_directory() -> None:
    data = store_checkpoint_metadata(_relative_only())
    moved = load_checkpoint_metadata(data, "s3://bucket/moved/savepoint-abc123-0123456789ab/")
    sp = moved.operator_states[0].subtask_states[0].raw_keyed_state[0]
    assert isinstance(sp, KeyGroupsStateHandle)
    delegate = sp.delegate
    assert isinstance(delegate, RelativeFileStateHandle)
    assert delegate.path == "s3://bucket/moved/savepoint-abc123-0123456789ab/sp-file"
    assert delegate.relative_path == "sp-file"


def test_relative_handle_without_context_is_an_error() -> None:
    data = store_checkpoint_metadata(_relative_only())
    with pytest.raises(MetadataFormatError) as info:
        load_checkpoint_metadata(data, None, SOURCE)
    assert "Cannot deserialize a RelativeFileStateHandle without a context" in str(info.value)
    assert SOURCE in str(info.value)


def test_absolute_handle_without_context_cannot_be_checked() -> None:
    data = store_checkpoint_metadata(sample_metadata())
    with pytest.raises(UnsafeStatePathError) as info:
        load_checkpoint_metadata(data, None, SOURCE)
    assert "'/data/chk/job/shared/a.sst'" in str(info.value)
    assert SOURCE in str(info.value)
    assert "no snapshot directory was given" in str(info.value)


def test_metadata_without_relative_handles_loads_without_context() -> None:
    md = CheckpointMetadata(
        1, (OperatorState("op", 1, 1, {0: OperatorSubtaskState((key_groups(),))}),)
    )
    assert load_checkpoint_metadata(store_checkpoint_metadata(md), None) == md


def key_groups() -> KeyGroupsStateHandle:
    return KeyGroupsStateHandle(
        KeyGroupRangeOffsets(KeyGroupRange(0, 0), (0,)), ByteStreamStateHandle("x", b"abc"), "h"
    )


@pytest.mark.parametrize(
    "props",
    [
        CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION,
        CheckpointProperties.RETAIN_ON_FAILURE,
        CheckpointProperties.RETAIN_ON_CANCELLATION,
        CheckpointProperties.for_savepoint(),
        CheckpointProperties.for_sync_savepoint(terminate=True),
        CheckpointProperties.for_unclaimed_snapshot(),
        None,
    ],
)
def test_properties_round_trip(props: CheckpointProperties | None) -> None:
    assert _round_trip(CheckpointMetadata(5, (), (), props)).properties == props


def test_store_writes_to_a_stream() -> None:
    out = io.BytesIO()
    data = store_checkpoint_metadata(sample_metadata(), out)
    assert out.getvalue() == data


def test_empty_key_group_range_round_trips() -> None:
    handle = KeyGroupsStateHandle(
        KeyGroupRangeOffsets(KeyGroupRange.EMPTY, ()), ByteStreamStateHandle("e", b""), "e"
    )
    md = CheckpointMetadata(2, (OperatorState("op", 1, 1, {0: OperatorSubtaskState((handle,))}),))
    loaded = _round_trip(md)
    kg = loaded.operator_states[0].subtask_states[0].managed_keyed_state[0]
    assert kg.key_group_range.is_empty()


def test_serializer_registry() -> None:
    assert MetadataSerializers.versions() == (1, 2)
    assert isinstance(MetadataSerializers.get_serializer(1), MetadataV1Serializer)
    assert isinstance(MetadataSerializers.get_serializer(2), MetadataV2Serializer)
    with pytest.raises(KeyError):
        MetadataSerializers.get_serializer(3)
    with pytest.raises(ValueError, match="version 1 is registered"):
        MetadataSerializers.register(MetadataV1Serializer())


def _changelog_metadata(entry: StreamStateHandle, new_entries: int = 1) -> CheckpointMetadata:
    handle = ChangelogStateBackendHandle(
        "rocksdb",
        KeyGroupRange(0, 3),
        9,
        7,
        (key_groups_handle(),),
        (entry,),
        new_entries,
    )
    sub = OperatorSubtaskState(managed_keyed_state=(handle,))
    return CheckpointMetadata(9, (OperatorState("keyed", 1, 128, {0: sub}),))


def test_changelog_handle_round_trips() -> None:
    md = _changelog_metadata(FileStateHandle("/data/chk/job/taskowned/entry-1", 77))
    loaded = _round_trip(md)
    assert loaded == md
    (handle,) = loaded.operator_states[0].subtask_states[0].managed_keyed_state
    assert isinstance(handle, ChangelogStateBackendHandle)
    assert (handle.materialization_id, handle.checkpoint_id, handle.new_entries) == (7, 9, 1)
    assert not handle.materialized_here and handle.new_changelog == handle.changelog


def test_changelog_entry_outside_the_snapshot_directories_is_refused() -> None:
    data = store_checkpoint_metadata(_changelog_metadata(FileStateHandle("/etc/passwd", 5)))
    with pytest.raises(UnsafeStatePathError) as info:
        load_checkpoint_metadata(data, EXCLUSIVE_DIR, SOURCE)
    assert "/etc/passwd" in str(info.value) and SOURCE in str(info.value)


def test_changelog_handle_with_more_new_entries_than_entries_is_refused() -> None:
    entry = FileStateHandle("/data/chk/job/taskowned/entry-1", 77)
    data = store_checkpoint_metadata(_changelog_metadata(entry, new_entries=2))
    with pytest.raises(MetadataFormatError, match="2 new changelog entries of 1"):
        load_checkpoint_metadata(data, EXCLUSIVE_DIR, SOURCE)


def test_unserialisable_handle_is_refused() -> None:
    class Strange(StreamStateHandle):
        state_size = 0

        def discard(self) -> None:
            pass

        def open_input_stream(self):  # type: ignore[no-untyped-def]
            return io.BytesIO()

    op = OperatorStateHandle({}, Strange())
    sub = OperatorSubtaskState((), (), (op,))
    md = CheckpointMetadata(1, (OperatorState("o", 1, 1, {0: sub}),))
    with pytest.raises(TypeError, match="Cannot serialize stream state handle of type Strange"):
        store_checkpoint_metadata(md)


# ---- corruption ------------------------------------------------------------------------


def _small_file() -> bytes:
    md = CheckpointMetadata(
        9,
        (OperatorState("op", 1, 8, {0: OperatorSubtaskState((key_groups(),))}),),
        (MasterState.from_json("pos", {"p": 1}),),
        CheckpointProperties.RETAIN_ON_FAILURE,
    )
    return store_checkpoint_metadata(md)


def _error(data: bytes) -> MetadataFormatError:
    with pytest.raises(MetadataFormatError) as info:
        load_checkpoint_metadata(data, EXCLUSIVE_DIR, SOURCE)
    return info.value


def test_truncation_at_every_offset_is_reported_as_truncated() -> None:
    data = _small_file()
    assert len(data) < 400
    for cut in range(len(data)):
        err = _error(data[:cut])
        assert err.kind == "truncated", (cut, str(err))  # type: ignore[attr-defined]
        assert err.offset == cut  # type: ignore[attr-defined]
        assert f"truncated at byte offset {cut}" in str(err)
        assert SOURCE in str(err)


def test_flipping_any_byte_is_detected() -> None:
    data = _small_file()
    for pos in range(len(data)):
        corrupt = bytearray(data)
        corrupt[pos] ^= 0x5A
        err = _error(bytes(corrupt))
        kind = err.kind  # type: ignore[attr-defined]
        if pos < 4:
            assert kind == "bad magic", pos
            assert err.offset == 0  # type: ignore[attr-defined]
        elif pos < HEADER_SIZE:
            assert kind == "checksum mismatch", pos
            assert err.offset == 16  # type: ignore[attr-defined]
        else:
            assert kind == "checksum mismatch", (pos, str(err))
            assert err.offset == len(data) - 4  # type: ignore[attr-defined]
        assert SOURCE in str(err)


def test_payload_corruption_message() -> None:
    data = bytearray(_small_file())
    data[30] ^= 1
    message = str(_error(bytes(data)))
    assert message.startswith(f"Invalid checkpoint metadata file {SOURCE}: checksum mismatch")
    assert f"at byte offset {len(data) - 4}" in message
    assert "the file is corrupted" in message


def test_unknown_version_is_reported_with_its_number() -> None:
    payload = MetadataSerializers.get_serializer(1).serialize(CheckpointMetadata(1))
    err = _error(encode_frame(99, payload))
    assert err.kind == "unknown version 99"  # type: ignore[attr-defined]
    assert err.offset == 4  # type: ignore[attr-defined]
    assert "unknown version 99 at byte offset 4" in str(err)
    assert "reads metadata versions 1" in str(err)


def test_bad_magic_flink_file() -> None:
    flink_header = struct.pack(">ii", 0x4960672D, 3) + b"\x00" * 40
    err = _error(flink_header)
    assert err.kind == "bad magic"  # type: ignore[attr-defined]
    assert "not a sparkpoint metadata file" in str(err)
    assert "at byte offset 0" in str(err)


def test_short_garbage_is_bad_magic_not_truncated() -> None:
    assert _error(b"XY").kind == "bad magic"  # type: ignore[attr-defined]
    assert _error(b"SP").kind == "truncated"  # type: ignore[attr-defined]


def test_trailing_bytes_are_reported() -> None:
    data = _small_file()
    err = _error(data + b"\x00")
    assert err.kind == "trailing bytes"  # type: ignore[attr-defined]
    assert err.offset == len(data)  # type: ignore[attr-defined]


def test_source_is_optional_in_messages() -> None:
    with pytest.raises(MetadataFormatError, match=r"^Invalid checkpoint metadata: truncated"):
        load_checkpoint_metadata(b"", None)


def test_malformed_payload_with_valid_checksum() -> None:
    err = _error(encode_frame(1, b"\x00\x00"))
    assert err.kind == "malformed payload"  # type: ignore[attr-defined]
    assert err.offset == HEADER_SIZE  # type: ignore[attr-defined]
    assert "checkpoint id needs 8 bytes" in str(err)


def test_unknown_handle_tag_with_valid_checksum() -> None:
    w = struct.pack(">qB", 1, 0)  # checkpoint id, no properties
    w += struct.pack(">I", 0)  # master states
    w += struct.pack(">I", 1)  # operators
    w += struct.pack(">I", 2) + b"op" + struct.pack(">ii", 1, 1)
    tag_offset = HEADER_SIZE + len(w)
    w += bytes([9])  # coordinator state with an unknown tag
    err = _error(encode_frame(1, w))
    assert "unknown stream state handle type 9" in str(err)
    assert err.offset == tag_offset  # type: ignore[attr-defined]


def test_non_inline_coordinator_state_is_rejected_on_read() -> None:
    op = OperatorState("op", 1, 1, {}, FileStateHandle(f"{EXCLUSIVE_DIR}/x", 1))  # type: ignore[arg-type]
    err = _error(store_checkpoint_metadata(CheckpointMetadata(1, (op,))))
    assert "coordinator state must be inline" in str(err)


# ---- property test ---------------------------------------------------------------------

_names = st.text(min_size=0, max_size=12)
_paths = st.text(alphabet="abcdef/_-.0123456789", min_size=1, max_size=20)
_segment = st.text(alphabet="abcdef_-.0123456789", min_size=1, max_size=8).filter(
    lambda s: s not in (".", "..")
)
_relative = st.lists(_segment, min_size=1, max_size=3).map("/".join)
_snapshot_dir = st.sampled_from([EXCLUSIVE_DIR, "/data/chk/job/shared", "/data/chk/job/taskowned"])
_local_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,10}", fullmatch=True)


@st.composite
def _stream_handles(draw: st.DrawFn, relative_ok: bool = True) -> StreamStateHandle:
    kind = draw(
        st.sampled_from(
            ["bytes", "file", "relative", "placeholder"] if relative_ok else ["bytes", "file"]
        )
    )
    if kind == "bytes":
        return ByteStreamStateHandle(draw(_names), draw(st.binary(max_size=64)))
    size = draw(st.integers(0, 2**62))
    digest = draw(st.none() | st.binary(min_size=32, max_size=32))
    if kind == "file":
        return FileStateHandle(f"{draw(_snapshot_dir)}/{draw(_relative)}", size, digest=digest)
    if kind == "placeholder":
        return PlaceholderStreamStateHandle("/" + draw(_paths), size)
    rel = draw(_relative)
    return RelativeFileStateHandle(f"{EXCLUSIVE_DIR}/{rel}", size, rel, digest=digest)


@st.composite
def _keyed_handles(draw: st.DrawFn, changelog_ok: bool = True) -> object:
    start = draw(st.integers(0, 200))
    count = draw(st.integers(0, 6))
    kgr = KeyGroupRange.of(start, start + count - 1)
    kind = draw(
        st.sampled_from(
            ["kg", "savepoint", "incremental", "changelog"]
            if changelog_ok
            else ["kg", "savepoint", "incremental"]
        )
    )
    if kind == "changelog":
        entries = tuple(draw(st.lists(_stream_handles(relative_ok=False), max_size=3)))
        return ChangelogStateBackendHandle(
            draw(st.sampled_from(["heap", "rocksdb"])),
            kgr,
            draw(st.integers(0, 2**40)),
            draw(st.integers(0, 2**40)),
            tuple(draw(st.lists(_keyed_handles(changelog_ok=False), max_size=2))),
            entries,
            draw(st.integers(0, len(entries))),
        )
    if kind == "incremental":
        files = st.lists(
            st.builds(HandleAndLocalPath, _stream_handles(), _local_names), max_size=3
        ).map(tuple)
        return IncrementalRemoteKeyedStateHandle(
            draw(_names),
            kgr,
            draw(st.integers(0, 2**40)),
            draw(files),
            draw(files),
            draw(_stream_handles()),
            draw(st.integers(-1, 2**40)),
            draw(_names),
        )
    delegate = draw(_stream_handles())
    kgo = KeyGroupRangeOffsets(kgr, draw(_offsets_in(delegate.state_size, len(kgr))))
    if kind == "savepoint":
        return KeyGroupsSavepointStateHandle(kgo, delegate)
    return KeyGroupsStateHandle(kgo, delegate, draw(_names))


@st.composite
def _offsets_in(draw: st.DrawFn, size: int, count: int) -> tuple[int, ...]:
    """Key-group offsets a real stream of ``size`` bytes can have: -1 (empty) or inside it,
    in key-group order (a reader refuses any other)."""
    if size == 0:
        return (-1,) * count
    inside = sorted(draw(st.lists(st.integers(0, size - 1), min_size=count, max_size=count)))
    empty = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    return tuple(-1 if e else o for o, e in zip(inside, empty))


@st.composite
def _operator_handles(draw: st.DrawFn) -> OperatorStateHandle:
    delegate = draw(_stream_handles())
    offsets = (
        st.lists(st.integers(0, delegate.state_size - 1), max_size=4).map(tuple)
        if delegate.state_size > 0
        else st.just(())
    )
    infos = st.dictionaries(
        _names,
        st.builds(StateMetaInfo, offsets, st.sampled_from(list(OperatorStateHandle.Mode))),
        max_size=3,
    )
    return OperatorStateHandle(draw(infos), delegate)


@st.composite
def _metadata(draw: st.DrawFn) -> CheckpointMetadata:
    operators = []
    for i in range(draw(st.integers(0, 3))):
        parallelism = draw(st.integers(1, 4))
        indices = draw(st.sets(st.integers(0, parallelism - 1)))
        subtasks = {
            index: OperatorSubtaskState(
                tuple(draw(st.lists(_keyed_handles(), max_size=2))),  # type: ignore[arg-type]
                tuple(draw(st.lists(_keyed_handles(), max_size=1))),  # type: ignore[arg-type]
                tuple(draw(st.lists(_operator_handles(), max_size=2))),
                tuple(draw(st.lists(_operator_handles(), max_size=1))),
                draw(st.booleans()),
            )
            for index in indices
        }
        coordinator = draw(
            st.none() | st.builds(ByteStreamStateHandle, _names, st.binary(max_size=32))
        )
        operators.append(
            OperatorState(
                f"op-{i}", parallelism, draw(st.integers(parallelism, 32768)), subtasks, coordinator
            )
        )
    masters = draw(
        st.lists(
            st.builds(
                MasterState, _names, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=32)
            ),
            max_size=3,
        )
    )
    props = draw(
        st.none()
        | st.builds(
            CheckpointProperties,
            st.booleans(),
            st.sampled_from(list(CheckpointType)),
            st.booleans(),
            st.booleans(),
            st.booleans(),
            st.booleans(),
            st.booleans(),
            st.booleans(),
        )
    )
    return CheckpointMetadata(draw(st.integers(0, 2**62)), tuple(operators), tuple(masters), props)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_metadata())
def test_property_round_trip(md: CheckpointMetadata) -> None:
    data = store_checkpoint_metadata(md)
    loaded = load_checkpoint_metadata(data, EXCLUSIVE_DIR)
    assert loaded == md
    assert store_checkpoint_metadata(loaded) == data
    assert loaded.state_size == md.state_size
    for op, orig in zip(loaded.operator_states, md.operator_states):
        assert op.coordinator_state == orig.coordinator_state
        for idx, sub in op.subtask_states.items():
            for h, o in zip(sub.all_handles(), orig.subtask_states[idx].all_handles()):
                delegate = getattr(h, "delegate", None)
                if delegate is not None:
                    assert _stream_bytes(delegate) == _stream_bytes(o.delegate)  # type: ignore[attr-defined]
