"""Broadcast operators: ``connect(stream.broadcast(descriptor, ...)).process(...)``.

Input 0 is the non-broadcast stream (keyed or not), input 1 the broadcast stream, whose
every record reaches every subtask (a ``broadcast`` edge). ``process_broadcast_element``
sees the broadcast states read-write, ``process_element`` (and ``on_timer`` on keyed
streams) read-only, as in Flink. The states are the declared ``MapStateDescriptor``s,
registered in the subtask's operator-state backend when the operator opens
(``runtime/task/carried_state.py`` holds that backend across epochs). The task hands every
batch of input 1 to the operator before any batch of input 0 of the same epoch
(``StageTree.deferred``), so a rule broadcast in an epoch applies to that epoch's records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkpoint.runtime.operators.chain import (
    KeyedProcessOperator,
    Operator,
    UserFunctionOperator,
    collect_outputs,
)
from sparkpoint.runtime.operators.context import KeyedContext, OperatorEnv

__all__ = ["BroadcastProcessOperator", "BroadcastStates", "KeyedBroadcastProcessOperator"]

UNKNOWN_STATE = (
    "The requested state does not exist. Check for typos in your state descriptor, or "
    "specify the state descriptor in the datastream.broadcast(...) call if you forgot to "
    "register it."
)


class BroadcastStates:
    """The declared broadcast states of one operator subtask: writable and read-only."""

    def __init__(self, backend: Any, descriptors: tuple[Any, ...]) -> None:
        self._writable = {d.get_name(): backend.get_broadcast_state(d) for d in descriptors}
        self._read_only = {name: s.read_only() for name, s in self._writable.items()}

    def _lookup(self, table: dict[str, Any], descriptor: Any) -> Any:
        name = descriptor.get_name() if hasattr(descriptor, "get_name") else descriptor
        state = table.get(name)
        if state is None:
            raise ValueError(UNKNOWN_STATE)
        return state

    def writable(self, descriptor: Any) -> Any:
        """The ``BroadcastState`` of ``descriptor``."""
        return self._lookup(self._writable, descriptor)

    def read_only(self, descriptor: Any) -> Any:
        """The ``ReadOnlyBroadcastState`` of ``descriptor``."""
        return self._lookup(self._read_only, descriptor)


class BroadcastContext:
    """``(Keyed)BroadcastProcessFunction.Context`` (``writable``) or ``ReadOnlyContext`` of
    a non-keyed broadcast operator: timestamp, time, broadcast state; on keyed streams also
    ``apply_to_keyed_state``."""

    def __init__(
        self,
        env: OperatorEnv,
        states: BroadcastStates,
        writable: bool,
        keyed_backend: Any = None,
    ) -> None:
        self._env = env
        self._states = states
        self._writable = writable
        self._keyed_backend = keyed_backend
        self.current_timestamp: int | None = None

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def current_processing_time(self) -> int:
        return self._env.clock.now_ms()

    def current_watermark(self) -> int:
        return self._env.watermark

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        if self._writable:
            return self._states.writable(state_descriptor)
        return self._states.read_only(state_descriptor)

    def apply_to_keyed_state(
        self, state_descriptor: Any, function: Callable[[Any, Any], None]
    ) -> None:
        """Call ``function(key, state)`` for every key of this subtask that has state
        under ``state_descriptor`` (Java Flink's ``applyToKeyedState``; PyFlink 2.3 lacks
        it)."""
        backend = self._keyed_backend
        if backend is None:
            raise RuntimeError(
                "apply_to_keyed_state is only available in a KeyedBroadcastProcessFunction"
            )
        state = backend.get_partitioned_state(state_descriptor)
        for key in list(backend.get_keys(state_descriptor.get_name())):
            backend.set_current_key(key)
            function(key, state)


class KeyedBroadcastContext(KeyedContext):
    """``KeyedBroadcastProcessFunction.ReadOnlyContext`` and ``OnTimerContext``: keyed
    timers and the current key, and the broadcast state read-only."""

    def __init__(
        self, env: OperatorEnv, backend: Any, operator_id: str, states: BroadcastStates
    ) -> None:
        super().__init__(env, backend, operator_id)
        self._states = states

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        return self._states.read_only(state_descriptor)


def _process_broadcast(
    op: Operator,
    function: Any,
    ctx: BroadcastContext,
    values: list[Any],
    timestamps: list[int | None] | None,
) -> None:
    """Call ``process_broadcast_element`` for a batch of input 1 and emit its output."""
    f = function.process_broadcast_element
    out_v: list[Any] = []
    out_t: list[int | None] | None = None if timestamps is None else []
    for i, v in enumerate(values):
        ts = None if timestamps is None else timestamps[i]
        ctx.current_timestamp = ts
        collect_outputs(f(v, ctx), ts, out_v, out_t, op.side_buffer)
    if out_v:
        op.emit(out_v, out_t)
    if op.side_buffer:
        op.flush_side_outputs()


class BroadcastProcessOperator(UserFunctionOperator):
    """``BroadcastProcessFunction`` on a non-keyed stream and a broadcast stream."""

    def __init__(
        self, operator_id: str, name: str, function: Any, descriptors: tuple[Any, ...]
    ) -> None:
        super().__init__(operator_id, name, function)
        self.descriptors = descriptors

    def open(self, env: OperatorEnv) -> None:
        states = BroadcastStates(env.operator_state_backend(self.operator_id), self.descriptors)
        self.read_ctx = BroadcastContext(env, states, writable=False)
        self.write_ctx = BroadcastContext(env, states, writable=True)
        super().open(env)

    def push_input(self, side: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        if side == 1:
            _process_broadcast(self, self.function, self.write_ctx, values, timestamps)
        else:
            self.push(values, timestamps)

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        ctx = self.read_ctx
        f = self.function.process_element
        out_v: list[Any] = []
        out_t: list[int | None] | None = None if timestamps is None else []
        for i, v in enumerate(values):
            ts = None if timestamps is None else timestamps[i]
            ctx.current_timestamp = ts
            collect_outputs(f(v, ctx), ts, out_v, out_t, self.side_buffer)
        return out_v, out_t


class KeyedBroadcastProcessOperator(KeyedProcessOperator):
    """``KeyedBroadcastProcessFunction``: keyed state and timers on input 0, broadcast
    state written by input 1 and read by input 0 and the timers."""

    def __init__(
        self,
        operator_id: str,
        name: str,
        function: Any,
        key_selector: Any,
        descriptors: tuple[Any, ...],
    ) -> None:
        super().__init__(operator_id, name, function, key_selector)
        self.descriptors = descriptors

    def make_context(self, env: OperatorEnv) -> KeyedContext:
        states = BroadcastStates(env.operator_state_backend(self.operator_id), self.descriptors)
        self.write_ctx = BroadcastContext(env, states, writable=True, keyed_backend=self.backend)
        return KeyedBroadcastContext(env, self.backend, self.operator_id, states)

    def push_input(self, side: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        if side == 1:
            _process_broadcast(self, self.function, self.write_ctx, values, timestamps)
        else:
            self.push(values, timestamps)
