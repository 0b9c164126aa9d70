"""Broadcast process functions, spelled as ``pyflink.datastream.functions`` spells them
(re-exported there): ``BroadcastProcessFunction`` on a non-keyed stream connected with a
``BroadcastStream``, ``KeyedBroadcastProcessFunction`` on a keyed one.

``process_broadcast_element`` reads and writes the broadcast state
(``ctx.get_broadcast_state(descriptor)``: a ``BroadcastState``); ``process_element`` and
``on_timer`` read it (a ``ReadOnlyBroadcastState``). Every subtask sees every broadcast
element, so every subtask must make the same changes to its broadcast state: on restore or
rescaling each subtask takes one subtask's copy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.datastream.time_domain import TimeDomain
from sparkpoint.datastream.timerservice import TimerService
from sparkpoint.state.functions import Function

__all__ = [
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
]


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: their contexts."""

    class BaseContext(ABC):
        """Valid only during one call; do not keep it."""

        @abstractmethod
        def timestamp(self) -> int | None:
            """The timestamp of the element (or firing timer), or None."""

        @abstractmethod
        def current_processing_time(self) -> int:
            """The current processing time."""

        @abstractmethod
        def current_watermark(self) -> int:
            """The current watermark."""

    class Context(BaseContext):
        """The broadcast side's context: the broadcast state read-write."""

        @abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            """The ``BroadcastState`` of ``state_descriptor`` (one passed to
            ``broadcast()``)."""

    class ReadOnlyContext(BaseContext):
        """The non-broadcast side's context: the broadcast state read-only."""

        @abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            """A ``ReadOnlyBroadcastState`` view of ``state_descriptor``'s state."""


class BroadcastProcessFunction(BaseBroadcastProcessFunction):
    """Processes a non-keyed stream connected with a broadcast stream."""

    class Context(BaseBroadcastProcessFunction.Context, ABC):
        """Context of ``process_broadcast_element``."""

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        """Context of ``process_element``."""

    @abstractmethod
    def process_element(
        self, value: Any, ctx: BroadcastProcessFunction.ReadOnlyContext
    ) -> Iterable[Any] | None:
        """Process an element of the non-broadcast stream."""

    @abstractmethod
    def process_broadcast_element(
        self, value: Any, ctx: BroadcastProcessFunction.Context
    ) -> Iterable[Any] | None:
        """Process an element of the broadcast stream (every subtask gets every one)."""


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction):
    """Processes a keyed stream connected with a broadcast stream: keyed state and timers
    on the keyed side, broadcast state read-only there."""

    class Context(BaseBroadcastProcessFunction.Context, ABC):
        """Context of ``process_broadcast_element``. It also has Java Flink's
        ``applyToKeyedState`` as ``apply_to_keyed_state`` (PyFlink 2.3 lacks it)."""

        @abstractmethod
        def apply_to_keyed_state(
            self, state_descriptor: Any, function: Callable[[Any, Any], None]
        ) -> None:
            """Call ``function(key, state)`` for every key of this subtask that has state
            under ``state_descriptor``."""

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        """Context of ``process_element``: also timers and the current key."""

        @abstractmethod
        def timer_service(self) -> TimerService:
            """The timer service for querying time and registering timers."""

        @abstractmethod
        def get_current_key(self) -> Any:
            """The key of the element being processed."""

    class OnTimerContext(ReadOnlyContext, ABC):
        """Context of ``on_timer``."""

        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """The time domain of the firing timer."""

    @abstractmethod
    def process_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext
    ) -> Iterable[Any] | None:
        """Process an element of the keyed stream."""

    @abstractmethod
    def process_broadcast_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.Context
    ) -> Iterable[Any] | None:
        """Process an element of the broadcast stream (every subtask gets every one)."""

    def on_timer(
        self, timestamp: int, ctx: KeyedBroadcastProcessFunction.OnTimerContext
    ) -> Iterable[Any] | None:
        """Called when a timer fires; by default it outputs nothing."""
        return None
