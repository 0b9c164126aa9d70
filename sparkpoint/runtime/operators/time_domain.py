"""``TimeDomain`` as ``pyflink.datastream.TimeDomain`` spells it."""

from __future__ import annotations

from enum import Enum

__all__ = ["TimeDomain"]


class TimeDomain(Enum):
    """Whether a firing timer is based on event time or on processing time."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1
