"""MemCheckpointStreamFactory: inline handles and the per-state size cap."""

from __future__ import annotations

import re

import pytest

from sparkpoint.checkpoint.handles import ByteStreamStateHandle
from sparkpoint.checkpoint.mem_streams import (
    DEFAULT_MAX_STATE_SIZE,
    MemCheckpointStreamFactory,
    StateSizeExceededError,
)
from sparkpoint.checkpoint.streams import CheckpointedStateScope
from sparkpoint.errors import StorageError

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def test_default_cap_is_5_mib() -> None:
    assert DEFAULT_MAX_STATE_SIZE == 5 * 1024 * 1024
    assert MemCheckpointStreamFactory().max_state_size == DEFAULT_MAX_STATE_SIZE


def test_empty_stream_gives_none() -> None:
    assert (
        MemCheckpointStreamFactory(10)
        .create_checkpoint_state_output_stream()
        .close_and_get_handle()
        is None
    )


@pytest.mark.parametrize("scope", list(CheckpointedStateScope))
def test_round_trip_with_uuid_name(scope: CheckpointedStateScope) -> None:
    stream = MemCheckpointStreamFactory(100).create_checkpoint_state_output_stream(scope)
    stream.write(b"abc")
    stream.write(bytearray(b"de"))
    assert stream.tell() == 5
    handle = stream.close_and_get_handle()
    assert isinstance(handle, ByteStreamStateHandle)
    assert handle.data == b"abcde"
    assert re.fullmatch(UUID_RE, handle.handle_name)


def test_exactly_max_size_is_allowed() -> None:
    stream = MemCheckpointStreamFactory(8).create_checkpoint_state_output_stream()
    stream.write(b"12345678")
    handle = stream.close_and_get_handle()
    assert handle is not None and handle.state_size == 8


def test_over_max_size_gives_flinks_message() -> None:
    stream = MemCheckpointStreamFactory(8).create_checkpoint_state_output_stream()
    stream.write(b"123456789")
    with pytest.raises(StateSizeExceededError) as err:
        stream.close_and_get_handle()
    assert str(err.value) == (
        "Size of the state is larger than the maximum permitted memory-backed state. "
        "Size=9 , maxSize=8 . Consider using a different checkpoint storage, like the "
        "FileSystemCheckpointStorage."
    )
    assert isinstance(err.value, StorageError) and isinstance(err.value, OSError)


def test_double_close_and_write_after_close() -> None:
    stream = MemCheckpointStreamFactory(8).create_checkpoint_state_output_stream()
    stream.write(b"1")
    assert stream.close_and_get_handle() is not None
    with pytest.raises(StorageError, match="already been closed"):
        stream.close_and_get_handle()
    with pytest.raises(StorageError):
        stream.write(b"2")
    stream.close()
    assert stream.closed


def test_invalid_cap() -> None:
    with pytest.raises(ValueError, match="max_state_size must be > 0"):
        MemCheckpointStreamFactory(0)
