"""A job without Spark for tests of what the driver serves: the progress the dashboard and
``/metrics`` read and the request queue the REST API fills, behind the same names as the
``JobMaster`` and ``JobProgress`` give them (``runtime.rest.job_server.ServedJob``)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.metrics.job_metrics import JobMetrics
from sparkpoint.runtime.driver.settings import ServerSettings


class FakeProgress:
    """The counters the dashboard reads, fixed: a running job after 7 epochs."""

    def __init__(self, job_id: str, job_name: str) -> None:
        self.job_id = job_id
        self.job_name = job_name
        self.status = "RUNNING"
        self.epochs_run = 7
        self.records_in = 700
        self.restarts = 0
        self.checkpointing = False
        self.checkpoint_interval_ms = -1
        self.commit_latency_ms: int | None = None
        self.record_latency: Any = None
        self.metrics = JobMetrics()

    def epoch_reports(self) -> list[Any]:
        return []

    def keyed_operators(self) -> list[Any]:
        return []

    def checkpoint_stats(self) -> list[Any]:
        return []

    def failovers(self) -> list[Any]:
        return []

    def consumer_lag(self) -> dict[str, dict[str, int]]:
        return {}

    def records_skipped(self) -> dict[str, dict[str, int]]:
        return {}

    def emit_event_time_lags(self) -> dict[str, dict[int, int]]:
        return {}


@dataclass
class FakeJob:
    """A job whose requests are recorded; the test answers their futures."""

    server_settings: ServerSettings
    job_id: str = "0f" * 16
    job_name: str = "fake-job"
    requests: list[tuple[str, str | None, bool, Future[Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.progress: Any = FakeProgress(self.job_id, self.job_name)

    @property
    def status(self) -> str:
        return str(self.progress.status)

    def request(self, kind: str, target: str | None = None, drain: bool = False) -> Future[Any]:
        future: Future[Any] = Future()
        self.requests.append((kind, target, drain, future))
        return future
