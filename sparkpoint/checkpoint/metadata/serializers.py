"""The registry of ``_metadata`` payload serializers by format version."""

from __future__ import annotations

from sparkpoint.checkpoint.metadata.serializer import MetadataSerializer
from sparkpoint.checkpoint.metadata.v1 import MetadataV1Serializer
from sparkpoint.checkpoint.metadata.v2 import MetadataV2Serializer

__all__ = ["CURRENT_VERSION", "MetadataSerializers"]

CURRENT_VERSION = 2
"""The format version new ``_metadata`` files are written in."""


class MetadataSerializers:
    """The registry of payload serializers by format version (Flink's MetadataSerializers)."""

    _by_version: dict[int, MetadataSerializer] = {
        1: MetadataV1Serializer(),
        2: MetadataV2Serializer(),
    }

    @classmethod
    def get_serializer(cls, version: int) -> MetadataSerializer:
        """The serializer of ``version`` (``KeyError`` if unknown)."""
        return cls._by_version[version]

    @classmethod
    def versions(cls) -> tuple[int, ...]:
        """Every version that can be read."""
        return tuple(sorted(cls._by_version))

    @classmethod
    def register(cls, serializer: MetadataSerializer) -> None:
        """Add a serializer for a new version (refuses to replace an existing one)."""
        if serializer.version in cls._by_version:
            raise ValueError(f"A serializer for version {serializer.version} is registered")
        cls._by_version[serializer.version] = serializer
