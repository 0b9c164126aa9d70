"""``DeliveryGuarantee``: what a sink promises under failures, as Flink's."""

from __future__ import annotations

from enum import Enum

__all__ = ["DeliveryGuarantee"]


class DeliveryGuarantee(Enum):
    """EXACTLY_ONCE: output visible once, when its checkpoint completes; AT_LEAST_ONCE:
    flushed at every epoch's end, duplicated on replay; NONE: best effort, nothing waited for."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2
