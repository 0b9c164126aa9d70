"""Failure injection, a manual clock and reference jobs for testing sparkpoint pipelines.

Injected failures are counted in files (created with ``O_EXCL``), so they fire an exact
number of times across Python workers, executors and retries. ``ManualClock`` moves only
when told; give it to ``StreamExecutionEnvironment.set_clock`` (or to a coordinator, restart
strategy, keyed backend or watermark generator) to drive time deterministically.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from sparkpoint.clock import FixedClock
from sparkpoint.datastream.functions import KeyedProcessFunction
from sparkpoint.runtime.context import MAX_WATERMARK

__all__ = [
    "CountAndEcho",
    "FailureInjector",
    "InjectedFailure",
    "ManualClock",
    "expected_keyed_count_output",
]


class ManualClock(FixedClock):
    """A clock that only moves when told: wall-clock and monotonic time are both ``ms``
    (set ``ms`` or call ``advance``)."""

    def __init__(self, ms: int = 0) -> None:
        super().__init__(ms)

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms`` milliseconds."""
        if ms < 0:
            raise ValueError(f"A clock does not go back; cannot advance by {ms} ms")
        self.ms += ms

    def __repr__(self) -> str:
        return f"ManualClock({self.ms})"


class InjectedFailure(RuntimeError):
    """The exception a ``FailureInjector`` raises."""


class FailureInjector:
    """Fires ``times`` failures in total, across processes, when ``maybe_fail`` sees
    ``at_record``; ``mode`` is ``"raise"`` (an exception) or ``"kill"`` (SIGKILL of the
    calling Python worker)."""

    def __init__(self, directory: str, at_record: int, times: int = 1, mode: str = "raise"):
        if mode not in ("raise", "kill"):
            raise ValueError("mode must be 'raise' or 'kill'")
        self.directory = directory
        self.at_record = at_record
        self.times = times
        self.mode = mode
        os.makedirs(directory, exist_ok=True)

    def fired(self) -> int:
        """How many failures fired so far."""
        return sum(1 for n in os.listdir(self.directory) if n.startswith("fired-"))

    def _claim(self) -> bool:
        for i in range(self.times):
            try:
                fd = os.open(
                    os.path.join(self.directory, f"fired-{i}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY
                )
            except FileExistsError:
                continue
            os.close(fd)
            return True
        return False

    def maybe_fail(self, record: int) -> None:
        """Fail here if this is the chosen record and failures remain."""
        if record != self.at_record or not self._claim():
            return
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFailure(f"injected failure at record {record}")


class CountAndEcho(KeyedProcessFunction):
    """A ``KeyedProcessFunction`` for exactly-once tests: echoes each record as
    ``("rec", key, value)``, keeps a count and a sum per key in ValueState, and when the
    input ends (a timer at the maximum watermark) emits ``("final", key, count, sum)``."""

    def __init__(self, injector: FailureInjector | None = None) -> None:
        self.injector = injector

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.state.descriptors import ValueStateDescriptor
        from sparkpoint.state.typeinfo import Types

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.total = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        key, x = value
        if self.injector is not None:
            self.injector.maybe_fail(x)
        count = self.count.value()
        if count is None:
            count = 0
            ctx.timer_service().register_event_time_timer(MAX_WATERMARK)
        self.count.update(count + 1)
        self.total.update((self.total.value() or 0) + x)
        yield ("rec", key, x)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ("final", ctx.get_current_key(), self.count.value(), self.total.value())

    def close(self) -> None:
        """Nothing to release."""


def expected_keyed_count_output(n_events: int, n_keys: int) -> tuple[set[tuple[Any, ...]], dict]:
    """What ``CountAndEcho`` over ``x -> (x % n_keys, x)`` for ``x in range(n_events)`` must
    produce: the echoed records and the final ``(count, sum)`` per key."""
    recs = {("rec", x % n_keys, x) for x in range(n_events)}
    finals: dict[int, tuple[int, int]] = {}
    for x in range(n_events):
        c, s = finals.get(x % n_keys, (0, 0))
        finals[x % n_keys] = (c + 1, s + x)
    return recs, finals
