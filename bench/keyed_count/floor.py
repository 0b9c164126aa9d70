"""The ``floor`` case: the keyed count's user functions (map, key selector,
``process_element`` on a dict-backed state and timer service) in a plain Python loop on one
core, which is what the runtime costs on top of the user's code."""

from __future__ import annotations

import time
from typing import Any

from keyed_count.harness import emit
from keyed_count.job import CountPerKey
from sparkpoint.runtime.operators.context import MAX_WATERMARK


class _DictValueState:
    """A ValueState over a dict, keyed by the floor context's current key."""

    def __init__(self, ctx: _FloorContext) -> None:
        self.ctx = ctx
        self.data: dict[Any, Any] = {}

    def value(self) -> Any:
        return self.data.get(self.ctx.key)

    def update(self, v: Any) -> None:
        self.data[self.ctx.key] = v


class _FloorContext:
    """A dict-backed runtime context, keyed context and timer service for the floor."""

    def __init__(self) -> None:
        self.key: Any = None
        self.timers: dict[Any, set[int]] = {}

    def get_state(self, descriptor: Any) -> _DictValueState:
        return _DictValueState(self)

    def timer_service(self) -> _FloorContext:
        return self

    def register_event_time_timer(self, ts: int) -> None:
        self.timers.setdefault(self.key, set()).add(ts)

    def get_current_key(self) -> Any:
        return self.key


def run_python_floor(n: int, keys: int) -> dict[str, Any]:
    """The user functions of the keyed count in a plain loop on one core (no runtime)."""
    ctx = _FloorContext()
    fn = CountPerKey()
    fn.open(ctx)
    k = keys
    mapper = lambda x: (x % k, 1)  # noqa: E731 - the job's own lambdas
    key_of = lambda t: t[0]  # noqa: E731
    t0 = time.perf_counter()
    for x in range(n):
        v = mapper(x)
        ctx.key = key_of(v)
        fn.process_element(v, ctx)
    out = []
    for key in ctx.timers:
        ctx.key = key
        out.extend(fn.on_timer(MAX_WATERMARK, ctx))
    seconds = time.perf_counter() - t0
    ok = len(out) == keys and sum(c for _, c in out) == n
    return {"seconds": round(seconds, 3), "events_per_s_per_core": round(n / seconds), "exact": ok}


def run(args: Any) -> None:
    """Emit one ``python_floor`` line per ``--keys`` value (``--events`` / 2 records)."""
    for keys in args.keys:
        floor = run_python_floor(args.events // 2, keys)
        emit(
            {
                "bench": "python_floor",
                "events": args.events // 2,
                "keys": keys,
                **floor,
                "two_cores_events_per_s": 2 * floor["events_per_s_per_core"],
            }
        )
