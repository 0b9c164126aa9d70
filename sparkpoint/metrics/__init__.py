"""Metrics as in PyFlink (``pyflink.metrics``): metric groups, counters, meters,
distributions and gauges, reported with the epochs' task reports and exported by the
driver (job client, dashboard, Prometheus ``/metrics``). Nothing here imports Spark."""

from sparkpoint.metrics.group import MetricGroup
from sparkpoint.metrics.types import Counter, Distribution, Meter, Metric

__all__ = ["Counter", "Distribution", "Meter", "Metric", "MetricGroup"]
