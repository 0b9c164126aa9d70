"""PyFlink's timers in a Flink savepoint, and the timers state of sparkpoint they become.

Flink keeps each timer service as priority-queue state ``_timer_state/event_<service>`` and
``_timer_state/processing_<service>``; PyFlink's Python operators use the service
``user-timers``. In the canonical savepoint an entry's key is, after the key group, the
``TimerSerializer`` bytes of one ``InternalTimer``: the timestamp with its sign bit flipped,
the key (PyFlink's ``Row`` of the key) and the namespace (``VoidNamespace`` for a process
function, a ``TimeWindow`` for a window); the value is empty.

sparkpoint keeps a key's timers in the keyed MAP state ``__sparkpoint_timers__`` with user
keys ``(domain, timestamp)`` (0: event time, 1: processing time) and values ``True``
(``runtime.operators.context``, which this layer does not import: a test checks the names
agree).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.state import typeinfo as ti
from sparkpoint.state.descriptors import MapStateDescriptor, StateDescriptor
from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.keyed_state import StateEntry, StateMetaInfo
from sparkpoint.state_processor.flink.serializers import value_decoder

__all__ = [
    "EVENT_TIME",
    "PROCESSING_TIME",
    "SPARKPOINT_TIMERS_STATE",
    "FlinkTimer",
    "TimerPlan",
    "timers_descriptor",
    "timers_state",
]

EVENT_TIME = 0  # TimeDomain.EVENT_TIME.value
PROCESSING_TIME = 1
SPARKPOINT_TIMERS_STATE = "__sparkpoint_timers__"
TIMER_STATE_PREFIX = "_timer_state/"
PYFLINK_TIMER_SERVICE = "user-timers"
_DOMAINS = {"event_": EVENT_TIME, "processing_": PROCESSING_TIME}


@dataclass(frozen=True)
class FlinkTimer:
    """One pending timer: its domain, time, Python key and namespace (``None`` for
    ``VoidNamespace``, ``(start, end)`` for a ``TimeWindow``)."""

    domain: int
    timestamp: int
    key: Any
    namespace: tuple[int, int] | None


class TimerPlan:
    """How the entries of one timer service's state become ``FlinkTimer``s: the service must
    be PyFlink's ``user-timers`` (another is refused by name), its elements Flink's timers of
    a key and a void or ``TimeWindow`` namespace."""

    def __init__(self, meta: StateMetaInfo, where: str) -> None:
        self.where = f"{where}, timer state {meta.name!r}"
        self.refusal: str | None = None  # why its timers are not imported (if it has any)
        self.domain = EVENT_TIME
        self.windowed = False
        service = meta.name[len(TIMER_STATE_PREFIX) :]
        domain = next((d for p, d in _DOMAINS.items() if service.startswith(p)), None)
        snap = meta.serializers.get("VALUE_SERIALIZER")
        if not meta.name.startswith(TIMER_STATE_PREFIX) or domain is None:
            self.refusal = (
                "priority-queue state that is not a timer service; only PyFlink's timers "
                "(_timer_state/event_user-timers, _timer_state/processing_user-timers) are "
                "imported"
            )
        elif service.split("_", 1)[1] != PYFLINK_TIMER_SERVICE:
            self.refusal = (
                f"timer service {service.split('_', 1)[1]!r} is not PyFlink's "
                f"{PYFLINK_TIMER_SERVICE!r} (a Java operator's timers); only Python "
                "operators' timers are imported"
            )
        elif snap is None or snap.kind != "timer":
            self.refusal = f"elements of {snap.describe() if snap else None}, not Flink's timers"
        elif snap.nested[1].kind not in ("void", "time_window"):
            self.refusal = (
                f"timers of namespace {snap.nested[1].describe()}; only timers of process "
                "functions (VoidNamespace) and of time windows (TimeWindow) are imported"
            )
        if self.refusal is not None or snap is None or domain is None:
            return
        self.domain = domain
        self.key_snapshot = snap.nested[0]
        self.windowed = snap.nested[1].kind == "time_window"
        self._read: Callable[[DataInput], Any] = value_decoder(snap)

    def read(self, entry: StateEntry) -> tuple[int, Any, tuple[int, int] | None]:
        """The timestamp, the key's ``Row`` and the namespace of one entry."""
        if self.refusal is not None:  # an empty service of another kind is no loss
            raise UnsupportedFlinkStateError(f"{self.where}: {self.refusal}")
        if entry.value:
            raise FlinkFormatError(f"{self.where}: a timer with {len(entry.value)} value bytes")
        inp = DataInput(entry.key, f"{self.where}: a timer")
        timestamp, row, namespace = self._read(inp)
        if inp.remaining:
            raise inp.fail(f"{inp.remaining} bytes after a timer")
        if self.windowed:
            start, end = namespace
            if start >= end:
                raise FlinkFormatError(f"{self.where}: a timer of the window [{start}, {end})")
            return timestamp, row, (start, end)
        return timestamp, row, None


def timers_descriptor() -> StateDescriptor:
    """sparkpoint's timers state, as its runtime registers it."""
    return MapStateDescriptor(
        SPARKPOINT_TIMERS_STATE, ti.Types.PICKLED_BYTE_ARRAY(), ti.Types.BOOLEAN()
    )


def timers_state(timers: list[FlinkTimer]) -> dict[Any, dict[tuple[int, int], bool]]:
    """Per key, its entries of sparkpoint's timers state (one per domain and time: Flink's
    timers of one key and time in several windows are one sparkpoint timer)."""
    out: dict[Any, dict[tuple[int, int], bool]] = {}
    for t in timers:
        out.setdefault(t.key, {})[(t.domain, t.timestamp)] = True
    return out


def carry_timers(
    values: dict[Any, dict[str, Any]],
    timers: list[FlinkTimer],
    descriptors: list[StateDescriptor],
) -> list[StateDescriptor]:
    """Add ``timers`` to ``values`` as sparkpoint's timers state (in place) and return the
    descriptors with that state's (``descriptors`` as given when there are no timers)."""
    if not timers:
        return descriptors
    for key, entries in timers_state(timers).items():
        values.setdefault(key, {})[SPARKPOINT_TIMERS_STATE] = entries
    return [*descriptors, timers_descriptor()]
