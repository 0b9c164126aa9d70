"""What every ``_metadata`` payload serializer shares: the contract, the handle type tags
and the ``MetadataFormatError`` every malformed read raises."""

from __future__ import annotations

import abc

from sparkpoint.checkpoint.metadata.checkpoint_metadata import CheckpointMetadata
from sparkpoint.checkpoint.paths import SnapshotPaths
from sparkpoint.errors import MetadataFormatError

__all__ = ["HandleType", "MetadataSerializer", "metadata_format_error"]


class HandleType:
    """Type tags of serialised state handles (Flink's numbering where the type is Flink's)."""

    NULL = 0
    BYTE_STREAM = 1
    FILE_STREAM = 2
    KEY_GROUPS = 3
    PARTITIONABLE_OPERATOR = 4
    INCREMENTAL_KEY_GROUPS = 5
    RELATIVE_STREAM = 6
    SAVEPOINT_KEY_GROUPS = 7
    CHANGELOG_KEYED = 8
    PLACEHOLDER = 15
    # FILE_STREAM and RELATIVE_STREAM followed by the SHA-256 of the file's bytes (every file
    # written since digests exist); readers of older releases refuse these tags.
    FILE_STREAM_WITH_DIGEST = 16
    RELATIVE_STREAM_WITH_DIGEST = 17


def metadata_format_error(
    kind: str, detail: str, offset: int, source: str | None
) -> MetadataFormatError:
    """A ``MetadataFormatError`` saying which problem (``kind``), where, and in which file."""
    where = f"checkpoint metadata file {source}" if source else "checkpoint metadata"
    err = MetadataFormatError(f"Invalid {where}: {kind} at byte offset {offset}: {detail}")
    err.kind = kind  # type: ignore[attr-defined]
    err.offset = offset  # type: ignore[attr-defined]
    err.source = source  # type: ignore[attr-defined]
    return err


class MetadataSerializer(abc.ABC):
    """Writes and reads the payload of one format version (Flink's MetadataSerializer)."""

    version: int

    @abc.abstractmethod
    def serialize(self, metadata: CheckpointMetadata) -> bytes:
        """The payload bytes of ``metadata``."""

    @abc.abstractmethod
    def deserialize(
        self, payload: bytes, paths: SnapshotPaths, base_offset: int
    ) -> CheckpointMetadata:
        """The metadata a payload holds; every file path is resolved and checked by
        ``paths`` (``paths.source`` names the file in errors)."""
