"""The driver's aggregation: records summed over accepted runs per operator and subtask,
user metrics kept at their latest value and handed back as the next run's bases, rates."""

from __future__ import annotations

from sparkpoint.metrics.job_metrics import JobMetrics, RateWindow
from sparkpoint.metrics.sample import (
    MetricKey,
    MetricKind,
    MetricSample,
    OperatorIO,
    TaskMetricsReport,
)


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _report(subtask: int, records: int, count: int) -> TaskMetricsReport:
    io = OperatorIO("op", "Count", records, records * 2, 1, 10, 9)
    samples = (
        MetricSample("op", MetricKey((), "seen"), MetricKind.COUNTER, count),
        MetricSample("op", MetricKey((), "ev"), MetricKind.METER, count, 10),
        MetricSample("op", MetricKey((), "g"), MetricKind.GAUGE, 0.5),
    )
    return TaskMetricsReport(subtask, (io,), samples)


def test_runs_fold_per_operator_and_subtask() -> None:
    clock = _Clock()
    metrics = JobMetrics(clock)
    clock.t += 5
    metrics.run_accepted([_report(0, 10, 10), _report(1, 4, 4)])
    clock.t += 5
    metrics.run_accepted([_report(0, 6, 16)])  # subtask 1 read nothing this epoch
    values = {(v.subtask, v.key.name): v.value for v in metrics.operator_values("id", "job")}
    assert values[(0, "numRecordsIn")] == 16
    assert values[(0, "numRecordsOut")] == 32
    assert values[(0, "numLateRecordsDropped")] == 2
    assert values[(1, "numRecordsIn")] == 4
    assert values[(0, "currentInputWatermark")] == 10
    assert values[(0, "currentOutputWatermark")] == 9
    assert values[(0, "seen")] == 16
    assert values[(0, "numRecordsInPerSecond")] == {"count": 16, "rate": 16 / 10}
    # 10 s since the job started, the meter's span
    assert values[(0, "ev")] == {"count": 16, "rate": 16 / 10}
    assert values[(0, "g")] == 0.5
    assert metrics.bases() == {
        "op": {
            0: {MetricKey((), "seen"): 16, MetricKey((), "ev"): 16},
            1: {MetricKey((), "seen"): 4, MetricKey((), "ev"): 4},
        }
    }


def test_rate_window_uses_the_last_span() -> None:
    window = RateWindow(10, start=0.0)
    window.add(5.0, 50)
    window.add(12.0, 120)
    window.add(20.0, 200)
    # 10 s back from t=21 is t=11: the latest point at or before it is (5, 50).
    assert window.rate(21.0) == (200 - 50) / 10
    assert window.rate(2.0) == 0.0  # nothing reported yet since the start
    fresh = RateWindow(60, start=0.0)
    fresh.add(4.0, 40)
    assert fresh.rate(8.0) == 40 / 8  # younger than the span: per second since the start
