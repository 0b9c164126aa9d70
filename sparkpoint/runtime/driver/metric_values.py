"""A job's metrics as readers get them (job client, dashboard, ``/metrics``): the operator
metrics the tasks reported, plus the job metrics read from the job's progress (checkpoint
counts and sizes, restarts, uptime) under Flink's names and sparkpoint's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkpoint.checkpoint.stats import CheckpointStats
from sparkpoint.metrics.catalog import key_of
from sparkpoint.metrics.sample import MetricKey, MetricKind, MetricValue
from sparkpoint.runtime.driver.progress import JobProgress

__all__ = ["metric_values", "metrics_by_identifier"]

_COMPLETED, _FAILED, _IN_PROGRESS = "COMPLETED", "FAILED", "IN_PROGRESS"
_ENDED = frozenset({"FAILED", "CANCELED", "FINISHED"})  # progress.TERMINAL_STATUSES


def _job_figures(progress: JobProgress) -> list[tuple[str, MetricKind, Any]]:
    stats = progress.checkpoint_stats()
    done = [s for s in stats if s.status == _COMPLETED]
    last: CheckpointStats | None = done[-1] if done else None
    epochs = progress.epoch_reports()
    metrics = progress.metrics
    uptime = (
        -1  # as Flink's uptime gauge once the job no longer runs
        if progress.status in _ENDED
        else int((metrics.now() - metrics.started) * 1000)
    )
    c, g = MetricKind.COUNTER, MetricKind.GAUGE
    latency = progress.record_latency
    return [
        ("lastCheckpointDuration", g, last.duration_ms if last else -1),
        ("lastCheckpointSize", g, last.checkpointed_size if last else -1),
        ("lastCheckpointFullSize", g, last.state_size if last else -1),
        ("numberOfCompletedCheckpoints", c, len(done)),
        ("numberOfFailedCheckpoints", c, sum(1 for s in stats if s.status == _FAILED)),
        ("numberOfInProgressCheckpoints", g, sum(1 for s in stats if s.status == _IN_PROGRESS)),
        ("numRestarts", c, progress.restarts),
        ("uptime", g, uptime),
        ("sparkpoint.numEpochs", c, progress.epochs_run),
        ("sparkpoint.lastEpochDuration", g, int(epochs[-1].seconds * 1000) if epochs else 0),
        (
            "sparkpoint.lastCommitLatency",
            g,
            -1 if progress.commit_latency_ms is None else progress.commit_latency_ms,
        ),
        ("sparkpoint.lastCommitRecordLatencyMax", g, latency.max_ms if latency else -1),
        ("sparkpoint.lastCommitRecordLatencyMean", g, latency.mean_ms if latency else -1),
        ("sparkpoint.lastCommitRecordLatencyMin", g, latency.min_ms if latency else -1),
        ("sparkpoint.subtaskRestores", c, sum(len(e.subtask_restores) for e in epochs)),
        (
            "sparkpoint.tasksAwayFromExecutor",
            g,
            epochs[-1].keyed_tasks - epochs[-1].on_preferred_executor if epochs else 0,
        ),
    ]


def _state_sizes(progress: JobProgress, names: Mapping[str, str]) -> list[MetricValue]:
    """``sparkpoint.stateSize`` per keyed/operator-state subtask of the latest completed
    checkpoint."""
    done = [s for s in progress.checkpoint_stats() if s.status == _COMPLETED]
    if not done:
        return []
    key = key_of("sparkpoint.stateSize")
    job_id, job_name = progress.job_id, progress.job_name
    return [
        MetricValue(
            job_id,
            job_name,
            sub.operator_id,
            names.get(sub.operator_id, sub.operator_id),
            sub.subtask,
            key,
            MetricKind.GAUGE,
            sub.state_size,
        )
        for sub in done[-1].subtasks
    ]


def _source_lag(progress: JobProgress, names: Mapping[str, str]) -> list[MetricValue]:
    """Flink's ``pendingRecords`` of each source that can tell (Kafka: records behind the end
    offset after the latest epoch): per split (``split.<id>.pendingRecords``) and their sum.
    A split has no fixed subtask here (each epoch reads it in a task of its own), so both
    are reported under subtask 0."""
    return _per_split(
        progress,
        names,
        progress.consumer_lag(),
        "pendingRecords",
        "pendingRecords",
        MetricKind.GAUGE,
    )


def _emit_lags(progress: JobProgress, names: Mapping[str, str]) -> list[MetricValue]:
    """Flink's ``currentEmitEventTimeLag`` per source subtask: when it emitted its latest
    record with a timestamp, less that timestamp (-1: its records carry none)."""
    key = key_of("currentEmitEventTimeLag")
    return [
        MetricValue(
            progress.job_id,
            progress.job_name,
            op,
            names.get(op, op),
            subtask,
            key,
            MetricKind.GAUGE,
            lag,
        )
        for op, by_subtask in progress.emit_event_time_lags().items()
        for subtask, lag in by_subtask.items()
    ]


def _records_skipped(progress: JobProgress, names: Mapping[str, str]) -> list[MetricValue]:
    """``sparkpoint.numRecordsSkipped`` of each source that skipped records its input no
    longer held (Kafka, opted in): per split (``split.<id>.numRecordsSkipped``) and their
    sum, under subtask 0 as ``pendingRecords``."""
    return _per_split(
        progress,
        names,
        progress.records_skipped(),
        "numRecordsSkipped",
        "sparkpoint.numRecordsSkipped",
        MetricKind.COUNTER,
    )


def _per_split(
    progress: JobProgress,
    names: Mapping[str, str],
    by_operator: Mapping[str, Mapping[str, int]],
    split_name: str,
    total_name: str,
    kind: MetricKind,
) -> list[MetricValue]:
    """Each operator's figures per split (``split.<id>.<split_name>``) and their sum
    (``total_name``), under subtask 0."""
    out: list[MetricValue] = []
    for op, splits in by_operator.items():
        keyed = [(MetricKey((("split", str(s)),), split_name), n) for s, n in splits.items()]
        keyed.append((key_of(total_name), sum(splits.values())))
        out += [
            MetricValue(progress.job_id, progress.job_name, op, names.get(op, op), 0, key, kind, n)
            for key, n in keyed
        ]
    return out


def metric_values(progress: JobProgress) -> list[MetricValue]:
    """Every metric of the job now: job metrics first, then per operator subtask."""
    job_id, job_name = progress.job_id, progress.job_name
    out = [
        MetricValue(job_id, job_name, None, None, None, key_of(name), kind, value)
        for name, kind, value in _job_figures(progress)
    ]
    operators = progress.metrics.operator_values(job_id, job_name)
    names = {v.operator_id: v.operator_name or "" for v in operators if v.operator_id}
    out += operators
    out += _state_sizes(progress, names)
    out += _source_lag(progress, names)
    out += _records_skipped(progress, names)
    out += _emit_lags(progress, names)
    return out


def metrics_by_identifier(progress: JobProgress) -> dict[str, Any]:
    """The job's metrics by Flink's identifier (``<job>.<operator>.<subtask>.<name>``)."""
    return {v.identifier: v.value for v in metric_values(progress)}
