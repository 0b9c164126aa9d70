"""Version 2 of the ``_metadata`` payload (the current one): keyed state in PyFlink's key
groups."""

from __future__ import annotations

from sparkpoint.checkpoint.metadata.serializer_base import MetadataSerializerBase

__all__ = ["MetadataV2Serializer"]


class MetadataV2Serializer(MetadataSerializerBase):
    """Version 2: version 1's payload; keyed state is in PyFlink's key groups, those of
    ``hashCode(Row.of(key))`` (version 1 used the raw key's ``hashCode``, Java Flink's)."""

    version = 2
