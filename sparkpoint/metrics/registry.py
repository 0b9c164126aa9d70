"""The user metrics of one task: a table per operator, created when a function first asks
for its metric group, and read once when the task reports (nothing per record)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from sparkpoint.metrics.group import MetricGroup, OperatorMetrics
from sparkpoint.metrics.sample import MetricKey, MetricKind, MetricSample
from sparkpoint.metrics.types import Counter, Distribution, Gauge, Meter, Metric

__all__ = ["TaskMetrics"]

_LOG = logging.getLogger("sparkpoint.task")

# operator id -> metric key -> the value the driver had (see ``MetricSample.value``)
Bases = Mapping[str, Mapping[MetricKey, Any]]


class TaskMetrics:
    """The metric groups of one subtask's operators, and their samples for the report."""

    def __init__(self, bases: Bases | None = None) -> None:
        self._bases: Bases = bases or {}
        self._operators: dict[str, OperatorMetrics] = {}

    def group(self, operator_id: str) -> MetricGroup:
        """The operator's metric group (the same one for every call in this task)."""
        table = self._operators.get(operator_id)
        if table is None:
            table = self._operators[operator_id] = OperatorMetrics(self._bases.get(operator_id))
        return table.root

    def fold(self) -> None:
        """Summarise the values distributions were given since the last fold: the task
        calls it after every batch, so a distribution holds at most a batch's values."""
        for table in self._operators.values():
            for distribution in table.distributions:
                distribution.fold()

    def samples(self) -> tuple[MetricSample, ...]:
        """Every registered metric's value now (gauges are called here)."""
        out: list[MetricSample] = []
        for operator_id, table in self._operators.items():
            for key, metric in table.metrics.items():
                sample = _sample(operator_id, key, metric)
                if sample is not None:
                    out.append(sample)
        return tuple(out)


def _sample(operator_id: str, key: MetricKey, metric: Metric) -> MetricSample | None:
    if isinstance(metric, Counter):
        return MetricSample(operator_id, key, MetricKind.COUNTER, metric.get_count())
    if isinstance(metric, Meter):
        return MetricSample(
            operator_id, key, MetricKind.METER, metric.get_count(), metric.time_span_in_seconds
        )
    if isinstance(metric, Distribution):
        value = (metric.count, metric.sum, metric.min, metric.max)
        return MetricSample(operator_id, key, MetricKind.DISTRIBUTION, value)
    if isinstance(metric, Gauge):
        return _gauge_sample(operator_id, key, metric)
    return None


def _gauge_sample(operator_id: str, key: MetricKey, gauge: Gauge) -> MetricSample | None:
    """A gauge's number; one that fails or is not a number is left out (logged), as
    Flink's reporters leave out gauges they cannot export."""
    try:
        value = gauge()
    except Exception as exc:  # a user callable: its failure must not fail the task
        _LOG.warning(
            "Gauge %s of operator %s failed: %r", ".".join(key.scope_components()), operator_id, exc
        )
        return None
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int | float) or (isinstance(value, float) and math.isnan(value)):
        _LOG.warning(
            "Gauge %s of operator %s returned %r, not a number: not reported",
            ".".join(key.scope_components()),
            operator_id,
            value,
        )
        return None
    return MetricSample(operator_id, key, MetricKind.GAUGE, value)
