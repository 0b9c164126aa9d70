"""``OutputTag``: names a side output of a process function (PyFlink's
``pyflink.datastream.OutputTag``)."""

from __future__ import annotations

from typing import Any

__all__ = ["OutputTag"]


class OutputTag:
    """A side output: ``yield tag, value`` in a process function emits ``value`` to it, and
    ``DataStream.get_side_output(tag)`` is the stream of those values (typed by
    ``type_info``; without one the values stay Python objects, as PyFlink pickles them)."""

    # How the runtime recognises ``(tag, value)`` pairs without importing the API layer.
    is_output_tag = True

    def __init__(self, tag_id: str, type_info: Any = None) -> None:
        if not isinstance(tag_id, str) or not tag_id:
            raise ValueError(f"OutputTag id must be a non-empty string, got {tag_id!r}")
        self.tag_id = tag_id
        self.type_info = type_info

    def get_id(self) -> str:
        """Flink's ``OutputTag.getId``."""
        return self.tag_id

    def get_type_info(self) -> Any:
        return self.type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(self.tag_id)

    def __repr__(self) -> str:
        return f"OutputTag(tag_id={self.tag_id!r}, type_info={self.type_info!r})"
