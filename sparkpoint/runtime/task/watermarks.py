"""The watermark a subtask works with: the minimum over the job's watermark entries
(``operator@split`` in source stages, ``operator@subtask`` after a shuffle), idle source
splits left out and never below the combined watermark shipped before (Flink's
``WatermarkOutputMultiplexer`` over split outputs)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["MAX_WATERMARK", "MIN_WATERMARK", "combined_watermark"]

MIN_WATERMARK = -(2**63)
MAX_WATERMARK = 2**63 - 1


def combined_watermark(marks: Mapping[str, int], idle: frozenset[str], floor: int) -> int:
    """The minimum over the entries of ``marks`` not in ``idle``, never below ``floor``
    (``floor`` itself when every entry is idle, ``MIN_WATERMARK`` when there is none)."""
    active = [wm for key, wm in marks.items() if key not in idle]
    if not active:
        return floor if marks else MIN_WATERMARK
    return max(floor, min(active))
