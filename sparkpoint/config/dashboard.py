"""``DashboardOptions``: the read-only web dashboard the driver serves while a job runs."""

from __future__ import annotations

from sparkpoint.config.option import (
    BOOLEAN,
    STRING,
    ConfigOption,
    OptionGroup,
    duration_type,
    int_type,
)

__all__ = ["DashboardOptions"]


class DashboardOptions(OptionGroup):
    """Whether and where the driver serves a job's dashboard (Flink's checkpoint tab)."""

    TITLE = "Dashboard"

    ENABLED = ConfigOption(
        "sparkpoint.dashboard.enabled",
        BOOLEAN,
        False,
        "Serve a read-only web page of the running job (status, epoch rate, checkpoint "
        "history with durations and sizes, per-subtask sizes, restores and failovers) from "
        "the driver; its URL is logged and given by JobClient.get_dashboard_url().",
    )
    HOST = ConfigOption(
        "sparkpoint.dashboard.host",
        STRING,
        "127.0.0.1",
        "Address the driver's servers bind to (the dashboard and REST API, and the "
        "Prometheus reporter's port); the default serves this machine only (the page shows "
        "job and operator names and paths, unauthenticated: beyond loopback the driver "
        "warns; put a reverse proxy that authenticates in front).",
    )
    PORT = ConfigOption(
        "sparkpoint.dashboard.port",
        int_type(minimum=0, maximum=65535),
        0,
        "Port of the job's server (the dashboard, and the REST API when on); 0 takes any "
        "free port.",
    )
    REFRESH_INTERVAL = ConfigOption(
        "sparkpoint.dashboard.refresh-interval",
        duration_type(1),
        2000,
        "How often the page reloads itself in the browser (as Flink's web.refresh-interval); "
        "above 0.",
    )
