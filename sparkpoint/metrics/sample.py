"""What travels from a task to the driver and from the driver to readers: metric keys,
user-metric samples, per-operator I/O figures and the values readers get. All picklable."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GroupPath",
    "MetricKey",
    "MetricKind",
    "MetricSample",
    "MetricValue",
    "OperatorIO",
    "TaskMetricsReport",
]

# A metric group's place below its operator: one (name, value) per ``add_group`` call,
# ``value`` None for a plain group and the value of a key/value group.
GroupPath = tuple[tuple[str, str | None], ...]


class MetricKind(enum.StrEnum):
    """The kinds of metric (Flink's, with PyFlink's distribution)."""

    COUNTER = "counter"
    GAUGE = "gauge"
    METER = "meter"
    DISTRIBUTION = "distribution"


@dataclass(frozen=True)
class MetricKey:
    """A user metric of one operator: its group path and name."""

    groups: GroupPath
    name: str

    def scope_components(self) -> tuple[str, ...]:
        """The group names and key/value pairs, Flink's scope order, then the name."""
        parts: list[str] = []
        for name, value in self.groups:
            parts.append(name)
            if value is not None:
                parts.append(value)
        parts.append(self.name)
        return tuple(parts)


@dataclass(frozen=True)
class MetricSample:
    """A user metric's value at the end of a task's run. ``value``: the count (counter,
    meter), the gauge's number, or ``(count, sum, min, max)`` (distribution).
    ``time_span_s``: a meter's time span."""

    operator_id: str
    key: MetricKey
    kind: MetricKind
    value: Any
    time_span_s: int = 0


@dataclass(frozen=True)
class OperatorIO:
    """What one operator of a task did in its run: records in and out, late records
    dropped, and the watermarks it ended with."""

    operator_id: str
    operator_name: str
    records_in: int
    records_out: int
    late_dropped: int
    input_watermark: int
    output_watermark: int


@dataclass(frozen=True)
class TaskMetricsReport:
    """A task's metrics for one run: per-operator I/O (deltas of the run) and the user
    metrics' values (absolute: they started from what the driver had)."""

    subtask: int
    operators: tuple[OperatorIO, ...] = ()
    user: tuple[MetricSample, ...] = ()


@dataclass(frozen=True)
class MetricValue:
    """One metric as readers see it. ``operator_*`` and ``subtask`` are None for job-level
    metrics. ``value`` is a number (None: not known yet), for a meter a dict with count and
    rate (per second), for a distribution a dict with count, sum, min, max and mean."""

    job_id: str
    job_name: str
    operator_id: str | None
    operator_name: str | None
    subtask: int | None
    key: MetricKey
    kind: MetricKind
    value: Any

    @property
    def identifier(self) -> str:
        """Flink's metric identifier: ``<job>.<operator>.<subtask>.<groups>.<name>``
        (``<job>.<groups>.<name>`` for a job-level metric)."""
        parts = [self.job_name]
        if self.operator_name is not None:
            parts += [self.operator_name, str(self.subtask)]
        parts += self.key.scope_components()
        return ".".join(parts)
