"""Flink's ``GET /jobs/<id>/metrics`` for the REST API: the job-scope metrics (checkpoint
counts and durations, restarts, uptime, ``sparkpoint.lastCommitRecordLatency*``...) by name,
values as strings, as Flink's ``JobMetricsHandler`` answers."""

from __future__ import annotations

from typing import Any

from sparkpoint.runtime.driver.metric_values import metric_values
from sparkpoint.runtime.driver.progress import JobProgress

__all__ = ["job_metrics_body"]


def job_metrics_body(progress: JobProgress, get: str | None) -> list[dict[str, Any]]:
    """Without ``get``: ``[{"id": name}]`` of every job-scope metric; with ``get`` (names,
    comma-separated): ``[{"id": name, "value": str}]`` of those the job has, in its order
    (names it lacks are left out, as Flink does)."""
    job_scope = {
        ".".join(v.key.scope_components()): v.value
        for v in metric_values(progress)
        if v.operator_id is None
    }
    if get is None:
        return [{"id": name} for name in job_scope]
    wanted = {n.strip() for n in get.split(",") if n.strip()}
    return [
        {"id": name, "value": str(value)} for name, value in job_scope.items() if name in wanted
    ]
