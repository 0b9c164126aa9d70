"""Broadcast-state reference jobs (importable by Spark's Python workers) and their exact
expected output.

Events ``0..n_events-1`` (keyed by ``x % n_keys``, or not keyed) are connected with rules
``0..n_rules-1`` from a one-split source (so every subtask receives the rules in order). The
broadcast side keeps two broadcast states: ``rules`` (``r % N_SLOTS`` -> sum of its rules)
and ``totals`` (``"sum"`` -> running sum of all rules), and emits ``("rule", subtask, r,
running sum)`` as a side output: a subtask whose broadcast state was lost, doubled or taken
from the wrong copy prints a wrong running sum. The keyed variant echoes every event, keeps
a count and a sum per key and, when the input ends, emits ``("final", key, count, sum,
rules state)`` from a timer, reading the broadcast state read-only.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.common import Encoder, Types
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    OutputTag,
)
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.state import MapStateDescriptor, ValueStateDescriptor
from sparkpoint.testing import FailureInjector
from tests.runtime.jobs.reference import END_OF_INPUT

N_SLOTS = 5
RULES = MapStateDescriptor("rules", Types.INT(), Types.LONG())
TOTALS = MapStateDescriptor("totals", Types.STRING(), Types.LONG())
AUDIT = OutputTag("audit")


def _apply_rule(r: int, ctx: Any, subtask: int) -> Any:
    rules = ctx.get_broadcast_state(RULES)
    rules.put(r % N_SLOTS, (rules.get(r % N_SLOTS) or 0) + r)
    totals = ctx.get_broadcast_state(TOTALS)
    running = (totals.get("sum") or 0) + r
    totals.put("sum", running)
    return AUDIT, ("rule", subtask, r, running)


class KeyedRules(KeyedBroadcastProcessFunction):
    """The keyed variant (see the module doc); ``injector`` fails at a rule in subtask 0
    (``on="rule"``; every subtask sees every rule) or at an event (``on="event"``)."""

    def __init__(self, injector: FailureInjector | None = None, on: str = "rule") -> None:
        self.injector = injector
        self.on = on

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.total = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if self.injector is not None and self.on == "event":
            self.injector.maybe_fail(value)
        self.count.update((self.count.value() or 0) + 1)
        self.total.update((self.total.value() or 0) + value)
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        yield ("rec", ctx.get_current_key(), value)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        if self.injector is not None and self.on == "rule" and self.subtask == 0:
            self.injector.maybe_fail(value)
        yield _apply_rule(value, ctx, self.subtask)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        rules = sorted(ctx.get_broadcast_state(RULES).items())
        yield ("final", ctx.get_current_key(), self.count.value(), self.total.value(), rules)


class PlainRules(BroadcastProcessFunction):
    """The non-keyed variant: echoes events, applies rules (``injector`` fails at a rule in
    subtask 0)."""

    def __init__(self, injector: FailureInjector | None = None) -> None:
        self.injector = injector

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield ("rec", value)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        if self.injector is not None and self.subtask == 0:
            self.injector.maybe_fail(value)
        yield _apply_rule(value, ctx, self.subtask)


def broadcast_job(
    env: Any,
    out_dir: str,
    n_events: int,
    n_rules: int,
    n_keys: int | None,
    function: Any,
) -> None:
    """The job of the module doc; ``n_keys=None`` for the non-keyed variant. Main output
    to ``out_dir``, the audit side output to ``out_dir + "-audit"`` (exactly-once sinks)."""
    events = env.from_source(NumberSequenceSource(0, n_events - 1), None, "events").uid("events")
    rules = (
        env.from_source(NumberSequenceSource(0, n_rules - 1), None, "rules")
        .set_parallelism(1)
        .uid("rules")
    )
    if n_keys is not None:
        keys = n_keys
        events = events.key_by(lambda x: x % keys)
    out = events.connect(rules.broadcast(RULES, TOTALS)).process(function).uid("bc")
    out.sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build()).uid(
        "sink"
    )
    (
        out.get_side_output(AUDIT)
        .sink_to(
            FileSink.for_row_format(out_dir + "-audit", Encoder.simple_string_encoder()).build()
        )
        .uid("audit-sink")
    )


def expected_rules_state(n_rules: int) -> list[tuple[int, int]]:
    """The ``rules`` broadcast state after every rule."""
    slots: dict[int, int] = {}
    for r in range(n_rules):
        slots[r % N_SLOTS] = slots.get(r % N_SLOTS, 0) + r
    return sorted(slots.items())


def expected_audit(subtasks: range, rules: range) -> list[tuple[Any, ...]]:
    """The audit lines of ``subtasks`` for ``rules`` (the running sum starts at rule 0)."""
    return sorted(("rule", s, r, r * (r + 1) // 2) for s in subtasks for r in rules)


def expected_finals(
    n_events: int, n_keys: int, n_rules: int
) -> dict[int, tuple[int, int, list[tuple[int, int]]]]:
    """Per key: (count, sum, rules state) of the keyed variant's final output."""
    finals: dict[int, tuple[int, int, list[tuple[int, int]]]] = {}
    rules = expected_rules_state(n_rules)
    for x in range(n_events):
        c, s, _ = finals.get(x % n_keys, (0, 0, rules))
        finals[x % n_keys] = (c + 1, s + x, rules)
    return finals
