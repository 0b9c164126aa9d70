"""Jobs of the metrics tests (importable by Spark's Python workers): the PyFlink program of
issue 31, a map registering every metric kind in ``open()``."""

from __future__ import annotations

from typing import Any

from sparkpoint.common import Encoder
from sparkpoint.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream import MapFunction, RuntimeContext
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.testing import FailureInjector

N_KEYS = 5
BUCKETS = 100  # the distribution sees x % BUCKETS


class ParseWithMetrics(MapFunction):
    """Counts its records (a counter and a meter), records ``x % 100`` in a distribution,
    and exposes its counter's own view (a gauge): the counter goes on across epochs."""

    def __init__(self, injector: FailureInjector | None = None) -> None:
        self.injector = injector
        self.last = -1

    def open(self, runtime_context: RuntimeContext) -> None:
        group = runtime_context.get_metrics_group().add_group("parser")
        self.records = group.counter("records")
        self.sizes = group.distribution("sizes")
        self.events = group.meter("events", time_span_in_seconds=60)
        group.gauge("seen", lambda: self.records.get_count())
        group.add_group("stream", "numbers").gauge("last", lambda: self.last)

    def map(self, value: Any) -> Any:
        if self.injector is not None:
            self.injector.maybe_fail(value)
        self.records.inc()
        self.sizes.update(value % BUCKETS)
        self.events.mark_event()
        self.last = value
        return value


def metrics_job(env: Any, out_dir: str, n: int, injector: FailureInjector | None = None) -> None:
    """numbers -> parse (metrics) -> key_by -> reduce -> exactly-once FileSink."""
    (
        env.from_source(NumberSequenceSource(0, n - 1), None, "numbers")
        .uid("numbers")
        .map(ParseWithMetrics(injector))
        .name("parse")
        .uid("parse")
        .key_by(lambda x: x % N_KEYS)
        .reduce(lambda a, b: a + b)
        .name("sum")
        .uid("sum")
        .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
        .name("sink")
        .uid("sink")
    )


class PeakPending(MapFunction):
    """Updates a distribution per record; the gauge ``peak`` is the most values the
    distribution ever held unsummarised (the task folds them after every batch)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        group = runtime_context.get_metrics_group()
        self.sizes = group.distribution("sizes")
        self.peak = 0
        group.gauge("peak", lambda: self.peak)

    def map(self, value: Any) -> Any:
        self.sizes.update(value)
        # update is the pending list's append: its __self__ is the list the task folds
        self.peak = max(self.peak, len(self.sizes.update.__self__))  # type: ignore[attr-defined]
        return value
