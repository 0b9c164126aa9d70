"""Two-input operators: ``connect(...)`` followed by ``map``/``flat_map``/``process``.

Each input batch arrives with its side (0: the first stream, 1: the second) through
``push_input``; the operator calls the function's ``*1`` or ``*2`` method. On keyed
connected streams both inputs share one keyed state backend and one timer service (each
side keyed by its own selector, so the same key on either side reaches the same subtask and
the same state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.runtime.operators.chain import (
    KeyedProcessOperator,
    Operator,
    UserFunctionOperator,
    collect_outputs,
)
from sparkpoint.runtime.operators.context import ProcessContext

__all__ = ["CoOperator", "KeyedCoProcessOperator"]

# How a two-input operator calls its function for side 0 and side 1: (function, value, ctx).
SideCall = Callable[[Any, Any, Any], Iterable[Any] | None]


def _co_map(side: int) -> SideCall:
    if side == 0:
        return lambda fn, v, ctx: (fn.map1(v),)
    return lambda fn, v, ctx: (fn.map2(v),)


def _co_flat_map(side: int) -> SideCall:
    if side == 0:
        return lambda fn, v, ctx: fn.flat_map1(v)
    return lambda fn, v, ctx: fn.flat_map2(v)


def _co_process(side: int) -> SideCall:
    if side == 0:
        return lambda fn, v, ctx: fn.process_element1(v, ctx)
    return lambda fn, v, ctx: fn.process_element2(v, ctx)


CALLS: dict[str, Callable[[int], SideCall]] = {
    "co_map": _co_map,
    "co_flat_map": _co_flat_map,
    "co_process": _co_process,
    "keyed_co_process": _co_process,
}


class CoOperator(UserFunctionOperator):
    """``CoMapFunction``, ``CoFlatMapFunction`` or ``CoProcessFunction`` on two streams."""

    def __init__(self, operator_id: str, name: str, function: Any, kind: str) -> None:
        super().__init__(operator_id, name, function)
        self.calls = (CALLS[kind](0), CALLS[kind](1))

    def push_input(self, side: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        ctx = ProcessContext(self.env)
        call, fn = self.calls[side], self.function
        out_v: list[Any] = []
        out_t: list[int | None] | None = None if timestamps is None else []
        for i, v in enumerate(values):
            ts = None if timestamps is None else timestamps[i]
            ctx.current_timestamp = ts
            collect_outputs(call(fn, v, ctx), ts, out_v, out_t, self.side_buffer)
        if out_v:
            self.emit(out_v, out_t)
        if self.side_buffer:
            self.flush_side_outputs()

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        self.push_input(0, values, timestamps)


class KeyedCoProcessOperator(KeyedProcessOperator):
    """``KeyedCoProcessFunction`` (or a Co(Flat)MapFunction) on connected keyed streams:
    one keyed state backend and one set of timers for both inputs."""

    def __init__(
        self,
        operator_id: str,
        name: str,
        function: Any,
        key_selectors: tuple[Any, Any],
        kind: str,
    ) -> None:
        super().__init__(operator_id, name, function, key_selectors[0])
        self.key_selectors = key_selectors
        self.side_calls = (CALLS[kind](0), CALLS[kind](1))

    def push_input(self, side: int, values: list[Any], timestamps: list[int | None] | None) -> None:
        self.key_selector = self.key_selectors[side]
        self.call = self.side_calls[side]
        Operator.push(self, values, timestamps)

    def push(self, values: list[Any], timestamps: list[int | None] | None) -> None:
        self.push_input(0, values, timestamps)
