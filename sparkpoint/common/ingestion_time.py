"""``TimeCharacteristic.IngestionTime``: records are stamped at the source with processing time.

As Flink's ``StreamSourceContexts.AutomaticWatermarkContext`` did: each record's timestamp
is the processing time when the source emits it, and the watermark follows processing time
in steps of the auto-watermark interval (``now - now % interval``), so it advances even
while the source is idle. In sparkpoint processing time is the epoch's (read once on the
driver, see ``docs/architecture.md``), so a source's records of one epoch share a timestamp
and the watermark moves at epoch ends; it never reaches a timestamp of the current epoch.
"""

from __future__ import annotations

from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.common.watermark_strategy import (
    MIN_WATERMARK,
    WatermarkGenerator,
    WatermarkStrategy,
)

__all__ = ["IngestionTimeStrategy", "IngestionTimeWatermarks"]


class IngestionTimeWatermarks(WatermarkGenerator):
    """The latest ingestion time aligned down to the interval (and below the time itself)."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self._watermark = MIN_WATERMARK

    def on_event(self, event_timestamp: int) -> None:
        """``event_timestamp`` is processing time: align it down to the interval."""
        aligned = event_timestamp - 1
        if self.interval_ms > 0:
            aligned = min(aligned, event_timestamp - event_timestamp % self.interval_ms)
        self._watermark = max(self._watermark, aligned)

    def current_watermark(self) -> int:
        return self._watermark


class IngestionTimeStrategy(WatermarkStrategy):
    """The strategy the environment puts behind each source under IngestionTime."""

    assigns_ingestion_time = True

    def __init__(self, interval_ms: int) -> None:
        super().__init__(WatermarkStrategy._MONOTONOUS)
        self.interval_ms = interval_ms

    def create_watermark_generator(self, clock: Clock = SYSTEM_CLOCK) -> WatermarkGenerator:
        return IngestionTimeWatermarks(self.interval_ms)

    def __repr__(self) -> str:
        return f"IngestionTimeStrategy(interval_ms={self.interval_ms})"
