"""The driver's metrics of one job's operators: what accepted runs reported, aggregated per
operator and subtask, kept on the driver so they outlive the workers that reported them.

Records in/out and late drops are summed over accepted runs; user metrics keep the value
the latest accepted run reported (the next run starts from it, ``bases``); meters' rates
are derived here from the counts the epochs report, over each meter's time span.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sparkpoint.metrics.sample import (
    MetricKey,
    MetricKind,
    MetricSample,
    MetricValue,
    TaskMetricsReport,
)

__all__ = ["RECORDS_IN_RATE_SPAN_S", "JobMetrics", "RateWindow"]

RECORDS_IN_RATE_SPAN_S = 60  # numRecordsInPerSecond: Flink's MeterView default span
_MAX_RATE_POINTS = 4096


class RateWindow:
    """Events per second over the last ``span_s`` seconds, from (time, count) points."""

    def __init__(self, span_s: float, start: float) -> None:
        self.span_s = span_s
        self._start = start
        self._points: list[tuple[float, float]] = [(start, 0)]

    def add(self, now: float, count: float) -> None:
        """The count is ``count`` at ``now``."""
        self._points.append((now, count))
        if len(self._points) > _MAX_RATE_POINTS:
            del self._points[: len(self._points) // 2]

    @property
    def count(self) -> float:
        """The latest count."""
        return self._points[-1][1]

    def rate(self, now: float) -> float:
        """(latest count - count ``span_s`` ago) / the time between them, at most the span."""
        horizon = now - self.span_s
        ref = 0
        for i, (t, _c) in enumerate(self._points):
            if t > horizon:
                break
            ref = i
        del self._points[:ref]  # older points are never a reference again
        t0, c0 = self._points[0]
        elapsed = min(self.span_s, now - t0) if t0 <= horizon else now - t0
        if elapsed <= 0:
            return 0.0
        return (self._points[-1][1] - c0) / elapsed


@dataclass
class _Subtask:
    """One operator subtask's figures on the driver."""

    name: str
    records_in: int = 0
    records_out: int = 0
    late_dropped: int = 0
    input_watermark: int | None = None
    output_watermark: int | None = None
    rate_in: RateWindow | None = None


class JobMetrics:
    """Operator and user metrics of one job (see the module doc). Written by the job
    master's thread; read by the job client, the dashboard and ``/metrics`` (copies)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        self._subtasks: dict[tuple[str, int], _Subtask] = {}
        self._user: dict[tuple[str, int], dict[MetricKey, MetricSample]] = {}
        self._meters: dict[tuple[str, int, MetricKey], RateWindow] = {}

    def now(self) -> float:
        """The clock the rates are measured with."""
        return self._clock()

    def run_accepted(self, reports: Iterable[TaskMetricsReport]) -> None:
        """Fold in the metrics of an accepted run's tasks."""
        now = self._clock()
        with self._lock:
            for report in reports:
                self._fold(report, now)

    def _fold(self, report: TaskMetricsReport, now: float) -> None:
        for io in report.operators:
            sub = self._subtasks.get((io.operator_id, report.subtask))
            if sub is None:
                sub = self._subtasks[(io.operator_id, report.subtask)] = _Subtask(io.operator_name)
                sub.rate_in = RateWindow(RECORDS_IN_RATE_SPAN_S, self.started)
            sub.records_in += io.records_in
            sub.records_out += io.records_out
            sub.late_dropped += io.late_dropped
            sub.input_watermark = io.input_watermark
            sub.output_watermark = io.output_watermark
            assert sub.rate_in is not None
            sub.rate_in.add(now, sub.records_in)
        for sample in report.user:
            place = (sample.operator_id, report.subtask)
            self._user.setdefault(place, {})[sample.key] = sample
            if sample.kind is MetricKind.METER:
                window = self._meters.get((*place, sample.key))
                if window is None:
                    window = RateWindow(sample.time_span_s or 60, self.started)
                    self._meters[(*place, sample.key)] = window
                window.add(now, sample.value)

    def bases(self) -> dict[str, dict[int, dict[MetricKey, Any]]]:
        """Operator id -> subtask -> the user metrics' values the next run starts from
        (counters, meters, distributions; gauges are read afresh)."""
        out: dict[str, dict[int, dict[MetricKey, Any]]] = {}
        with self._lock:
            for (op, subtask), samples in self._user.items():
                kept = {k: s.value for k, s in samples.items() if s.kind is not MetricKind.GAUGE}
                if kept:
                    out.setdefault(op, {})[subtask] = kept
        return out

    def operator_values(self, job_id: str, job_name: str) -> list[MetricValue]:
        """Every operator subtask's system and user metrics now."""
        now = self._clock()
        out: list[MetricValue] = []
        with self._lock:
            names = {op: sub.name for (op, _), sub in self._subtasks.items()}
            for (op, subtask), sub in sorted(self._subtasks.items()):
                assert sub.rate_in is not None
                figures: list[tuple[str, MetricKind, Any]] = [
                    ("numRecordsIn", MetricKind.COUNTER, sub.records_in),
                    ("numRecordsOut", MetricKind.COUNTER, sub.records_out),
                    ("numRecordsInPerSecond", MetricKind.METER, _meter(sub.rate_in, now)),
                    ("numLateRecordsDropped", MetricKind.COUNTER, sub.late_dropped),
                    ("currentInputWatermark", MetricKind.GAUGE, sub.input_watermark),
                    ("currentOutputWatermark", MetricKind.GAUGE, sub.output_watermark),
                ]
                for name, kind, value in figures:
                    key = MetricKey((), name)
                    out.append(
                        MetricValue(job_id, job_name, op, sub.name, subtask, key, kind, value)
                    )
            for (op, subtask), samples in sorted(self._user.items()):
                for key, sample in samples.items():
                    value = self._user_value(op, subtask, sample, now)
                    name = names.get(op, op)
                    out.append(
                        MetricValue(job_id, job_name, op, name, subtask, key, sample.kind, value)
                    )
        return out

    def _user_value(self, op: str, subtask: int, sample: MetricSample, now: float) -> Any:
        if sample.kind is MetricKind.METER:
            return _meter(self._meters[(op, subtask, sample.key)], now)
        if sample.kind is MetricKind.DISTRIBUTION:
            count, total, low, high = sample.value
            mean = total / count if count else 0.0
            return {"count": count, "sum": total, "min": low, "max": high, "mean": mean}
        return sample.value


def _meter(window: RateWindow, now: float) -> dict[str, float]:
    """A meter as readers get it: its count and its rate per second."""
    return {"count": window.count, "rate": window.rate(now)}
