"""``MetricOptions``: Flink's Prometheus reporter keys, as far as sparkpoint supports them."""

from __future__ import annotations

from sparkpoint.config.option import ConfigOption, OptionGroup, enum_type, int_type

__all__ = ["PROMETHEUS_REPORTER_FACTORY", "MetricOptions"]

PROMETHEUS_REPORTER_FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"


class MetricOptions(OptionGroup):
    """Where a job's metrics are exported. The driver serves them in Prometheus's text
    format at ``/metrics``: with the dashboard on, always, on the dashboard's host and
    port; with the reporter below configured and the dashboard off, on the reporter's port
    and ``sparkpoint.dashboard.host``, where ``/metrics`` is all that is served. Only the
    reporter named ``prom`` is read; other reporters and reporter keys are not
    supported."""

    TITLE = "Metrics"

    PROMETHEUS_FACTORY = ConfigOption(
        "metrics.reporter.prom.factory.class",
        enum_type(PROMETHEUS_REPORTER_FACTORY),
        None,
        "Set to Flink's PrometheusReporterFactory to serve the job's metrics (Flink's "
        "system metrics and the user's, Flink's Prometheus names and labels) at "
        "http://<host>:<port>/metrics for Prometheus to scrape.",
    )
    PROMETHEUS_PORT = ConfigOption(
        "metrics.reporter.prom.port",
        int_type(minimum=0, maximum=65535),
        9249,
        "Port of the /metrics endpoint when the dashboard is off (with the dashboard on, "
        "its port serves them); 0 takes any free port. One port: Flink's port ranges are "
        "not supported.",
    )
