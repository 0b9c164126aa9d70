"""``TimeCharacteristic`` as ``pyflink.datastream.TimeCharacteristic`` spells it."""

from __future__ import annotations

from enum import Enum

from sparkpoint.config import parse_enum_member

__all__ = ["TimeCharacteristic"]


class TimeCharacteristic(Enum):
    """How the job determines time for time-dependent operations (timers, windows).

    ``ProcessingTime`` uses the machine clock of the operator; ``IngestionTime`` stamps each
    record when it enters the dataflow at the source; ``EventTime`` uses the timestamp carried
    by each record together with watermarks (see ``WatermarkStrategy``).
    """

    ProcessingTime = 0
    IngestionTime = 1
    EventTime = 2

    @staticmethod
    def of(characteristic: object) -> TimeCharacteristic:
        """The member named by ``characteristic`` (a member, its name or its int value)."""
        return parse_enum_member(characteristic, TimeCharacteristic, "TimeCharacteristic")
