"""``TimerService``: the contract for querying time and registering timers in user functions.

Spelled as ``pyflink.datastream.TimerService``; the runtime supplies the implementation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["TimerService"]


class TimerService(ABC):
    """Time and timers as seen by one keyed operator.

    Timers are scoped to the key of the element (or timer) being processed: a timer registered
    while processing key ``k`` fires with ``k`` as the current key. Registering the same
    timestamp twice for one key and domain yields one timer.
    """

    @abstractmethod
    def current_processing_time(self) -> int:
        """The current processing time in milliseconds since the epoch."""

    @abstractmethod
    def current_watermark(self) -> int:
        """The current event-time watermark of the operator, in milliseconds."""

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None:
        """Fire ``on_timer`` once processing time reaches ``timestamp``."""

    @abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None:
        """Fire ``on_timer`` once the event-time watermark reaches ``timestamp``."""

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Remove the current key's processing-time timer at ``timestamp`` if not yet fired."""

    @abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None:
        """Remove the current key's event-time timer at ``timestamp`` if not yet fired."""
