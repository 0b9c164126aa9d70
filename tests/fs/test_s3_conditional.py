"""S3 writes: conditional PUT (If-None-Match) makes no-overwrite creates race-free."""

from __future__ import annotations

import pytest

from sparkpoint.fs import get_filesystem

pytestmark = pytest.mark.s3


def test_two_open_writers_only_first_commit_wins(s3_base: str) -> None:
    fs = get_filesystem(s3_base)
    path = f"{s3_base}/race/obj"
    first = fs.open_output(path)
    second = fs.open_output(path)  # no HEAD at open: both get a stream
    first.write(b"first")
    second.write(b"second")
    first.close()
    with pytest.raises(FileExistsError):
        second.close()
    assert fs.read_bytes(path) == b"first"


def test_large_stream_uses_multipart_and_stays_conditional(s3_base: str) -> None:
    fs = get_filesystem(s3_base)
    path = f"{s3_base}/race/big"
    data = bytes(range(256)) * (9 * 4096)  # 9 MiB: more than one 8 MiB part
    with fs.open_output(path) as out:
        out.write(data)
    assert fs.size(path) == len(data)
    assert fs.read_bytes(path) == data
    with pytest.raises(FileExistsError), fs.open_output(path) as out:
        out.write(data)
