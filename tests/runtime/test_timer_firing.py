"""Keyed timers without Spark: one pass fires every due timer in timestamp order, keeps the
rest, and the index skips epochs with nothing due (both backends)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.checkpoint.key_group_range import KeyGroupRange
from sparkpoint.runtime.operators.context import (
    MAX_WATERMARK,
    TIMERS_STATE,
    KeyedContext,
    OperatorEnv,
)
from sparkpoint.runtime.operators.time_domain import TimeDomain
from sparkpoint.state.backend import KeyedStateBackendParameters
from sparkpoint.state.heap import HeapKeyedStateBackend, clear_heap_cache
from sparkpoint.state.rocksdb import RocksDBKeyedStateBackend
from sparkpoint.testing import ManualClock


def _backend(kind: str, tmp_path: Any) -> Any:
    params = KeyedStateBackendParameters(
        "job",
        "op",
        0,
        1,
        128,
        KeyGroupRange(0, 127),
        str(tmp_path),
        ManualClock(0),
        timer_states=frozenset({TIMERS_STATE}),
    )
    if kind == "heap":
        return HeapKeyedStateBackend(params)
    return RocksDBKeyedStateBackend(params)


@pytest.mark.parametrize("kind", ["heap", "rocksdb"])
def test_due_timers_fire_in_order_once_and_the_rest_stay(kind: str, tmp_path: Any) -> None:
    backend = _backend(kind, tmp_path)
    clock = ManualClock(1_000)
    index: list[int | None] = [None, None]
    env = OperatorEnv(
        "job", "t", 1, 0, 1, 128, 0, False, watermark=50, timer_index=lambda op: index, clock=clock
    )
    ctx = KeyedContext(env, backend, "op")
    registered = 0
    for key in range(60):
        backend.set_current_key(f"k{key}")
        ctx.register_event_time_timer(100 - key)  # due when 100 - key <= 50
        ctx.register_event_time_timer(100 - key)  # the same timer twice: one timer
        ctx.register_processing_time_timer(1_000 + key % 3)  # due when key % 3 == 0
        registered += 2
    backend.set_current_key("k7")
    ctx.delete_event_time_timer(93)  # k7's event-time timer is gone
    fired = ctx.pop_due_timers()
    expected_event = [(100 - k, TimeDomain.EVENT_TIME, f"k{k}") for k in range(59, 49, -1)]
    expected_proc = [(1_000, TimeDomain.PROCESSING_TIME, f"k{k}") for k in range(0, 60, 3)]
    assert [(ts, d, key) for ts, d, key, _kg in fired[:10]] == expected_event
    assert sorted((ts, d.value, key) for ts, d, key, _kg in fired[10:]) == sorted(
        (ts, d.value, key) for ts, d, key in expected_proc
    )
    for _ts, _d, key, kg in fired:
        backend.set_current_key(key)
        assert backend.current_key_group == kg
    assert index == [51, 1_001]  # the earliest timers left, per domain
    assert ctx.pop_due_timers() == []  # nothing due any more
    env.watermark = MAX_WATERMARK
    clock.advance(10)
    rest = ctx.due_timers()  # the (timestamp, domain, key) shape window operators use
    assert len(rest) == registered - 1 - len(fired)
    assert [t[0] for t in rest if t[1] is TimeDomain.EVENT_TIME] == sorted(
        100 - k for k in range(50) if k != 7
    )
    assert index == [MAX_WATERMARK + 1, MAX_WATERMARK + 1]
    backend.close()
    clear_heap_cache()
