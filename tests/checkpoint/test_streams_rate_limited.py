"""RateLimitedStreamFactory: every stream of one factory together writes at most the rate
(a background materialization's upload), and the bytes arrive intact."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sparkpoint.checkpoint.fs_streams import FsCheckpointStreamFactory
from sparkpoint.checkpoint.handles import StreamStateHandle
from sparkpoint.checkpoint.streams import (
    CheckpointedStateScope,
    CheckpointStateOutputStream,
    CheckpointStreamFactory,
    ForwardingOutputStream,
    RateLimitedStreamFactory,
)
from sparkpoint.fs.arrow import LocalFileSystem

KIB = 1024


def _inner(tmp_path: Path) -> FsCheckpointStreamFactory:
    chk, shared = tmp_path / "chk-1", tmp_path / "shared"
    chk.mkdir()
    shared.mkdir()
    return FsCheckpointStreamFactory(LocalFileSystem(), str(chk), str(shared), 0, 4 * KIB)


def test_streams_of_one_factory_share_the_rate(tmp_path: Path) -> None:
    rate = 2048 * KIB
    factory = RateLimitedStreamFactory(_inner(tmp_path), rate)
    payloads = [bytes([i]) * (1024 * KIB) for i in range(2)]  # 2 MiB in all
    handles: dict[int, StreamStateHandle | None] = {}

    def write(index: int) -> None:
        stream = factory.create_checkpoint_state_output_stream(CheckpointedStateScope.SHARED)
        data = payloads[index]
        for offset in range(0, len(data), 64 * KIB):
            stream.write(data[offset : offset + 64 * KIB])
        handles[index] = stream.close_and_get_handle()

    t0 = time.monotonic()
    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    # All but the first 64 KiB wait for the rate: 2 MiB at 2 MiB/s takes about a second.
    assert elapsed >= (2048 - 64) * KIB / rate
    assert elapsed < 10
    for index, data in enumerate(payloads):
        handle = handles[index]
        assert handle is not None and handle.read_all() == data
        assert "/shared/" in str(getattr(handle, "path", ""))


def test_a_large_write_is_paced_in_chunks_and_abort_discards(tmp_path: Path) -> None:
    rate = 4096 * KIB
    factory = RateLimitedStreamFactory(_inner(tmp_path), rate)
    stream = factory.create_checkpoint_state_output_stream()
    t0 = time.monotonic()
    assert stream.write(b"x" * (3 * 1024 * KIB)) == 3 * 1024 * KIB  # one call, 3 MiB
    # paced in pieces of a tenth of a second's bytes; only the first goes at once
    assert time.monotonic() - t0 >= (3 * 1024 * KIB - rate // 10) / rate
    assert stream.tell() == 3 * 1024 * KIB
    stream.close()  # an abort: the file goes
    assert stream.closed
    assert list((tmp_path / "chk-1").iterdir()) == []


@pytest.mark.parametrize("rate", [0, -1])
def test_the_rate_must_be_positive(tmp_path: Path, rate: int) -> None:
    with pytest.raises(ValueError, match="bytes_per_second must be positive"):
        RateLimitedStreamFactory(_inner(tmp_path), rate)


class _Recording(CheckpointStreamFactory):
    """Records the size of every write its streams get."""

    def __init__(self, inner: CheckpointStreamFactory) -> None:
        self.inner = inner
        self.writes: list[int] = []

    def create_checkpoint_state_output_stream(
        self, scope: CheckpointedStateScope = CheckpointedStateScope.EXCLUSIVE
    ) -> CheckpointStateOutputStream:
        writes = self.writes

        class Stream(ForwardingOutputStream):
            def write(self, data: bytes | bytearray | memoryview) -> int:
                writes.append(len(data))
                return super().write(data)

        return Stream(self.inner.create_checkpoint_state_output_stream(scope))


def test_the_wrapped_stream_sees_a_write_every_tenth_of_a_second(tmp_path: Path) -> None:
    """A cancellable stream inside checks for its cancel at every write: a slow rate must
    not hold one write for long."""
    recording = _Recording(_inner(tmp_path))
    stream = RateLimitedStreamFactory(recording, 80 * KIB).create_checkpoint_state_output_stream()
    stream.write(b"y" * (40 * KIB))
    assert recording.writes == [8 * KIB] * 5  # a tenth of a second each
    assert stream.close_and_get_handle() is not None
