"""An s3fs output file whose every way of finishing is conditional (``If-None-Match: *``).

s3fs's ``xb`` mode already makes the one-shot PUT and the multipart completion conditional;
this closes its two gaps: an empty file (s3fs "touches" it unconditionally) and a failed
completion (s3fs leaves the multipart upload and its parts behind).
"""

from __future__ import annotations

from typing import Any, BinaryIO, cast

from s3fs.core import S3File

__all__ = ["ExclusiveS3File", "open_exclusive"]


class ExclusiveS3File(S3File):  # type: ignore[misc]
    """Mode ``xb`` only: the object appears on close unless the key exists already."""

    buffer: Any

    def commit(self) -> None:
        if self.tell() == 0 and self.buffer is not None:
            self._abort_mpu()
            self.fs.pipe_file(self.path, b"", mode="create")
            self.buffer = None
            return
        try:
            super().commit()
        except BaseException:
            self._abort_mpu()
            raise

    def discard(self) -> None:
        """Abort the upload; nothing is published and the stream is closed."""
        try:
            super().discard()
        finally:
            self.closed = True


def open_exclusive(s3: Any, path: str, part_size: int) -> BinaryIO:
    """A no-overwrite output stream to ``bucket/key`` (no request is sent before the first part)."""
    return cast(BinaryIO, ExclusiveS3File(s3, path, "xb", block_size=part_size))
