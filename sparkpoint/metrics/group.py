"""``MetricGroup`` (``pyflink.metrics.MetricGroup``): named metrics and sub-groups of one
operator's subtask, registered in the operator's table so the task can report them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sparkpoint.metrics.sample import GroupPath, MetricKey, MetricKind
from sparkpoint.metrics.types import Counter, Distribution, Gauge, Meter, Metric

__all__ = ["MetricGroup", "OperatorMetrics"]


class OperatorMetrics:
    """The user metrics of one operator in one task: every group's metrics by key, and the
    values the driver had for them (metrics start from these, so counts go on across
    epochs and restores)."""

    def __init__(self, bases: Mapping[MetricKey, Any] | None = None) -> None:
        self.metrics: dict[MetricKey, Metric] = {}
        self.distributions: list[Distribution] = []  # folded after every batch
        self.bases: Mapping[MetricKey, Any] = bases or {}
        self.root = MetricGroup(table=self)

    def add(self, key: MetricKey, metric: Metric) -> None:
        """Register ``metric`` under ``key`` (a gauge registered again replaces the first)."""
        self.metrics[key] = metric
        if isinstance(metric, Distribution):
            self.distributions.append(metric)


def _check_name(what: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"A metric {what} must be a non-empty string, not {name!r}")
    return name


class MetricGroup:
    """A named container of metrics and sub-groups (``pyflink.metrics.MetricGroup``).

    ``add_group(name, extra)`` makes a key/value group as PyFlink does: ``name`` joins the
    metric's name and ``extra`` becomes the value of the variable ``name`` (a Prometheus
    label). Registering a name again returns the metric registered first.
    """

    def __init__(self, scope: GroupPath = (), table: OperatorMetrics | None = None) -> None:
        self._path: GroupPath = scope
        # A group made on its own (tests, tools) gets a table of its own.
        self._table = table if table is not None else OperatorMetrics()
        self._groups: dict[tuple[str, str | None], MetricGroup] = {}
        self.metrics: dict[str, Any] = {}  # this group's metrics by name

    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        """The sub-group ``name``, or with ``extra`` the key/value group ``name``=``extra``."""
        part = (_check_name("group name", name), None if extra is None else str(extra))
        group = self._groups.get(part)
        if group is None:
            group = self._groups[part] = MetricGroup((*self._path, part), self._table)
        return group

    def counter(self, name: str) -> Counter:
        """Register (or return the existing) counter ``name``."""
        return self._register(name, MetricKind.COUNTER, lambda base: Counter(int(base or 0)))

    def gauge(self, name: str, obj: Callable[[], float]) -> None:
        """Register a gauge: ``obj()`` is read when the task reports (a number)."""
        if not callable(obj):
            raise TypeError(f"The gauge {name!r} needs a callable, not {obj!r}")
        self._put(name, Gauge(obj))

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        """Register (or return the existing) meter ``name``; its rate is taken over
        ``time_span_in_seconds``."""
        return self._register(
            name, MetricKind.METER, lambda base: Meter(time_span_in_seconds, int(base or 0))
        )

    def distribution(self, name: str) -> Distribution:
        """Register (or return the existing) distribution ``name``."""
        label = ".".join(MetricKey(self._path, str(name)).scope_components())

        def make(base: Any) -> Distribution:  # base: (count, sum, min, max) or None
            count, total, low, high = base or (0, 0, None, None)
            return Distribution(count, total, low, high, label)

        return self._register(name, MetricKind.DISTRIBUTION, make)

    def get_metric_group_scope(self) -> tuple[str, ...]:
        """The group names from the operator's group down to this one (a key/value group
        contributes its name and its value)."""
        return MetricKey(self._path, "").scope_components()[:-1]

    def _register(self, name: str, kind: MetricKind, make: Callable[[Any], Metric]) -> Any:
        existing = self.metrics.get(name)
        if existing is not None:
            return existing
        key = MetricKey(self._path, _check_name("name", name))
        metric = make(self._table.bases.get(key))
        self._put(name, metric)
        return metric

    def _put(self, name: str, metric: Metric) -> None:
        key = MetricKey(self._path, _check_name("name", name))
        self.metrics[name] = metric
        self._table.add(key, metric)
