"""Version 1 of the ``_metadata`` payload: keyed state in Java Flink's key groups."""

from __future__ import annotations

from sparkpoint.checkpoint.metadata.serializer_base import MetadataSerializerBase

__all__ = ["MetadataV1Serializer"]


class MetadataV1Serializer(MetadataSerializerBase):
    """Version 1: the payload of ``MetadataSerializerBase``; its keyed state was assigned to
    key groups by the raw key's ``hashCode`` (Java Flink's), so this release reads it but
    cannot restore it (``state/key_groups.py``)."""

    version = 1
