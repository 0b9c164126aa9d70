"""PyFlink's window state in a Flink savepoint, and the window operator state of sparkpoint
it becomes.

PyFlink's Python window operator keeps a window's contents as the keyed state
``window-contents`` (a list of the records, the reduced value or the accumulator, as for
``process``, ``reduce`` and ``aggregate``) in the window's ``TimeWindow`` namespace, and
its timers (the window's end, ``max_timestamp()``) in the timer service ``user-timers``
under the same namespace. sparkpoint's window operator (``runtime.operators.window_operator``)
keeps, per key, the MAP states ``_window.contents`` (window -> contents) and
``_window.timers`` (``(domain, time)`` -> the windows waiting for that timer), beside the
runtime's timers state. Windows are sparkpoint's ``TimeWindow`` objects, pickled; this layer
does not import the API that defines them, so their pickles are written here by name, byte
for byte as pickle writes them (a test checks both against the class).

Other state in window namespaces (a trigger's, or a ``ProcessWindowFunction``'s
``window_state()``) and the window set of merging (session) windows are refused by name.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Sequence
from typing import Any

from sparkpoint.state import typeinfo as ti
from sparkpoint.state.descriptors import MapStateDescriptor, StateDescriptor
from sparkpoint.state.serializers import PickleSerializer, write_varint
from sparkpoint.state_processor.flink.errors import UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.pyflink_state import PyFlinkKeyedState

__all__ = ["WINDOW_CONTENTS", "TimeWindowPickle", "carry_windows"]

WINDOW_CONTENTS = "window-contents"  # PyFlink's WINDOW_STATE_NAME
MERGING_WINDOW_SET = "merging-window-set"  # PyFlink's session windows' window set
SPARKPOINT_CONTENTS = "_window.contents"  # window_operator.CONTENTS
SPARKPOINT_WINDOW_TIMERS = "_window.timers"  # window_operator.TIMERS
TIME_WINDOW_CLASS = ("sparkpoint.datastream.window", "TimeWindow")


class TimeWindowPickle:
    """Stands for sparkpoint's ``TimeWindow(start, end)`` in values pickled by
    ``WindowPickleSerializer``: it pickles as that class does."""

    __slots__ = ("end", "start")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end

    def __reduce_ex__(self, protocol: Any) -> Any:
        # what object.__reduce_ex__ gives for TimeWindow (its __getstate__ is (start, end))
        return copyreg.__newobj__, (TimeWindowPickle,), (self.start, self.end)  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TimeWindowPickle)
            and self.start == other.start
            and self.end == other.end
        )

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


_PythonPickler: Any = pickle._Pickler  # type: ignore[attr-defined]  # overridable in Python


class _Pickler(_PythonPickler):
    """Python's own pickler, naming ``TimeWindowPickle`` as sparkpoint's ``TimeWindow``."""

    def save_global(self, obj: Any, name: Any = None) -> None:
        if obj is not TimeWindowPickle:
            super().save_global(obj, name)
            return
        module, qualname = TIME_WINDOW_CLASS
        self.save(module)
        self.save(qualname)
        self.write(pickle.STACK_GLOBAL)
        self.memoize(obj)


def dumps(value: Any) -> bytes:
    """``pickle.dumps(value, protocol=5)`` with ``TimeWindowPickle`` as ``TimeWindow``."""
    out = io.BytesIO()
    _Pickler(out, protocol=5).dump(value)
    return out.getvalue()


class WindowPickleSerializer(PickleSerializer):
    """``PickleSerializer`` for values holding windows: the same bytes and snapshot config
    (the savepoint records ordinary pickled state)."""

    def write(self, value: Any, out: bytearray) -> None:
        data = dumps(value)
        write_varint(len(data), out)
        out += data

    def serialize(self, value: Any) -> bytes:
        out = bytearray()
        self.write(value, out)
        return bytes(out)


class WindowPickleTypeInfo(ti.PickledBytesTypeInfo):
    """``Types.PICKLED_BYTE_ARRAY()`` for values holding windows."""

    def create_serializer(self) -> PickleSerializer:
        return WindowPickleSerializer()


def carry_windows(
    op: PyFlinkKeyedState, descriptors: Sequence[StateDescriptor], where: str
) -> list[StateDescriptor]:
    """Turn ``op``'s window state into sparkpoint's (in ``op.values``, in place) and return
    the descriptors to write it with: ``window-contents`` becomes ``_window.contents``, the
    timers of windows ``_window.timers``. Without window state, ``descriptors`` as given."""
    windowed_timers = [t for t in op.timers if t.namespace is not None]
    if any(d.name == MERGING_WINDOW_SET for d in descriptors):
        raise UnsupportedFlinkStateError(
            f"{where}: operator {op.uid!r} has {MERGING_WINDOW_SET!r}: merging (session) "
            "windows are not imported (their window set is not mapped to sparkpoint's); "
            "stop the job when no session is open, or start the sparkpoint job without them"
        )
    others = sorted(op.windowed_states - {WINDOW_CONTENTS})
    if others:
        raise UnsupportedFlinkStateError(
            f"{where}: operator {op.uid!r} has state {', '.join(map(repr, others))} in window "
            "namespaces (a trigger's or a ProcessWindowFunction's per-window state); only "
            f"the window contents ({WINDOW_CONTENTS!r}) are imported"
        )
    if WINDOW_CONTENTS not in op.windowed_states and not windowed_timers:
        return list(descriptors)  # not a window (a state of that name outside windows stays)
    for states in op.values.values():
        per_window = states.pop(WINDOW_CONTENTS, None)
        if per_window:
            states[SPARKPOINT_CONTENTS] = {
                TimeWindowPickle(s, e): v for (s, e), v in sorted(per_window.items())
            }
    for t in sorted(windowed_timers, key=lambda t: (t.domain, t.timestamp, t.namespace)):
        assert t.namespace is not None
        waiting = op.values.setdefault(t.key, {}).setdefault(SPARKPOINT_WINDOW_TIMERS, {})
        waiting.setdefault((t.domain, t.timestamp), []).append(TimeWindowPickle(*t.namespace))
    window_key = WindowPickleTypeInfo()
    pickled = ti.Types.PICKLED_BYTE_ARRAY()
    out = [d for d in descriptors if d.name != WINDOW_CONTENTS]
    out.append(MapStateDescriptor(SPARKPOINT_CONTENTS, window_key, pickled))
    out.append(MapStateDescriptor(SPARKPOINT_WINDOW_TIMERS, pickled, WindowPickleTypeInfo()))
    return out
