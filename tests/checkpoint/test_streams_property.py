"""Property tests: every write pattern round-trips, inline exactly when Flink inlines it."""

from __future__ import annotations

import itertools
import tempfile
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import ByteStreamStateHandle, FileStateHandle
from sparkpoint.checkpoint.mem_streams import MemCheckpointStreamFactory, StateSizeExceededError
from sparkpoint.fs.arrow import LocalFileSystem
from sparkpoint.fs.fsspec_fs import FsspecFileSystem

THRESHOLDS = st.sampled_from([0, 1, 7, 64, 100])
BUFFERS = st.sampled_from([0, 1, 8, 64, 100, 150])


@st.composite
def sized_writes(draw, threshold: int, capacity: int):  # type: ignore[no-untyped-def]
    """A total size near an interesting boundary, split into random chunks."""
    anchors = sorted({0, threshold, capacity, 2 * capacity})
    anchor = draw(st.sampled_from(anchors))
    total = max(0, anchor + draw(st.integers(-2, 2)))
    data = draw(st.binary(min_size=total, max_size=total))
    cuts = sorted(draw(st.lists(st.integers(0, total), max_size=6)))
    bounds = [0, *cuts, total]
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    flush_after = draw(st.sets(st.integers(0, max(0, len(chunks) - 1))))
    return data, chunks, flush_after


def _check_fs_round_trip(fs, base: str, threshold: int, buffer: int, draw_data) -> None:  # type: ignore[no-untyped-def]
    capacity = max(buffer, threshold)
    data, chunks, flush_after = draw_data(sized_writes(threshold, capacity))
    stream = FsCheckpointStreamFactory(
        fs, base, base, threshold, buffer
    ).create_checkpoint_state_output_stream()
    for i, chunk in enumerate(chunks):
        stream.write(chunk)
        if i in flush_after:
            stream.flush()
    assert stream.tell() == len(data)
    handle = stream.close_and_get_handle()
    if not data:
        assert handle is None
        return
    assert handle is not None
    assert handle.read_all() == data
    assert handle.state_size == len(data)
    if len(data) > threshold:
        assert isinstance(handle, FileStateHandle)
    else:
        assert isinstance(handle, ByteStreamStateHandle)


@settings(max_examples=150, deadline=None)
@given(threshold=THRESHOLDS, buffer=BUFFERS, data=st.data())
def test_fs_stream_round_trip_memory_fs(threshold: int, buffer: int, data: st.DataObject) -> None:
    base = f"memory://prop-{uuid.uuid4().hex}"
    _check_fs_round_trip(FsspecFileSystem("memory"), base, threshold, buffer, data.draw)


@settings(max_examples=60, deadline=None)
@given(threshold=THRESHOLDS, buffer=BUFFERS, data=st.data())
def test_fs_stream_round_trip_local_fs(threshold: int, buffer: int, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as base:
        _check_fs_round_trip(LocalFileSystem(), base, threshold, buffer, data.draw)


@settings(max_examples=100, deadline=None)
@given(
    max_size=st.sampled_from([1, 16, 100]),
    chunks=st.lists(st.binary(max_size=40), max_size=6),
)
def test_mem_stream_round_trip(max_size: int, chunks: list[bytes]) -> None:
    data = b"".join(chunks)
    stream = MemCheckpointStreamFactory(max_size).create_checkpoint_state_output_stream()
    for chunk in chunks:
        stream.write(chunk)
    if not data:
        assert stream.close_and_get_handle() is None
    elif len(data) > max_size:
        try:
            stream.close_and_get_handle()
        except StateSizeExceededError as exc:
            assert f"Size={len(data)} , maxSize={max_size} ." in str(exc)
        else:
            raise AssertionError("expected the size cap to trip")
    else:
        handle = stream.close_and_get_handle()
        assert isinstance(handle, ByteStreamStateHandle) and handle.data == data
