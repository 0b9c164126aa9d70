"""Errors of reading a Flink savepoint: malformed bytes, and what the importer cannot carry."""

from __future__ import annotations

from sparkpoint.errors import MetadataFormatError, RestoreError

__all__ = ["FlinkFormatError", "UnsupportedFlinkStateError"]


class FlinkFormatError(MetadataFormatError):
    """A Flink savepoint file is truncated, corrupt or of a version this reader does not know;
    the message names the file, the byte offset and what was expected."""


class UnsupportedFlinkStateError(RestoreError, ValueError):
    """Well-formed Flink state that the importer cannot carry into sparkpoint (an operator
    without a uid, native or incremental snapshots, serializers it does not know)."""
