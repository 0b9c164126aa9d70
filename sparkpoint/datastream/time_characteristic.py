"""``TimeCharacteristic`` as ``pyflink.datastream.TimeCharacteristic`` spells it."""

from __future__ import annotations

from enum import Enum

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
