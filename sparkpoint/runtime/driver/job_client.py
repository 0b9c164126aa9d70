"""The handle to a running job: status, cancel, savepoints, statistics, result."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from sparkpoint.common.job_status import JobStatus
from sparkpoint.metrics.sample import MetricValue
from sparkpoint.runtime.driver.changelog_checkpoints import MaterializationStats
from sparkpoint.runtime.driver.coordinator import CheckpointStats
from sparkpoint.runtime.driver.job_info import report_started_job
from sparkpoint.runtime.driver.job_master import JobMaster
from sparkpoint.runtime.driver.metric_values import metric_values, metrics_by_identifier
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.reports import EpochReport, FailoverEvent, SubtaskRestoreEvent

__all__ = ["JobClient", "JobExecutionResult", "JobServer", "ServeJob", "run_job"]


class JobServer(Protocol):
    """What the driver serves for a running job (dashboard, REST API, ``/metrics``); built
    by the layer above (``runtime.rest.job_server``), so the driver imports none of it."""

    @property
    def dashboard_url(self) -> str | None:
        """The dashboard's URL (None: no dashboard)."""

    @property
    def rest_url(self) -> str | None:
        """The REST API's URL (None: not served)."""

    def stop(self) -> None:
        """Stop serving (ports released)."""


ServeJob = Callable[[JobMaster], "JobServer | None"]
"""Starts what the driver serves for a job (None: nothing to serve)."""


@dataclass(frozen=True)
class JobExecutionResult:
    """What ``execute`` returns (PyFlink's ``JobExecutionResult``)."""

    job_id: str
    net_runtime_ms: int
    epochs: int
    restarts: int
    records_in: int
    checkpoints: tuple[CheckpointStats, ...]
    epoch_reports: tuple[EpochReport, ...] = ()
    failovers: tuple[FailoverEvent, ...] = ()
    # sparkpoint: background materializations adopted (changelog checkpoints), in order
    materializations: tuple[MaterializationStats, ...] = ()

    @property
    def subtask_restores(self) -> tuple[SubtaskRestoreEvent, ...]:
        """sparkpoint: every keyed subtask that restored by itself, in epoch order."""
        return tuple(r for e in self.epoch_reports for r in e.subtask_restores)

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        """Run time in milliseconds."""
        return self.net_runtime_ms

    def get_all_accumulator_results(self) -> dict[str, Any]:
        return {"epochs": self.epochs, "restarts": self.restarts, "records_in": self.records_in}

    def get_accumulator_result(self, accumulator_name: str) -> Any:
        return self.get_all_accumulator_results().get(accumulator_name)

    def is_job_execution_result(self) -> bool:
        return True

    def get_job_execution_result(self) -> JobExecutionResult:
        return self


class JobClient:
    """Controls a job started with ``execute_async`` (runs in a driver thread)."""

    def __init__(self, master: JobMaster, serve: ServeJob | None = None) -> None:
        self._master = master
        self._progress = master.progress
        self._result: Future[JobExecutionResult] = Future()
        self._server = serve(master) if serve is not None else None
        report_started_job(master.job_id, self._progress.job_name, self.get_dashboard_url())
        self._thread = threading.Thread(
            target=self._run, name=f"sparkpoint-{master.job_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            out = self._master.run()
            result = result_of(self._progress, out)
        except BaseException as exc:
            self._stop_server()
            self._result.set_exception(exc)
        else:
            self._stop_server()
            self._result.set_result(result)

    def _stop_server(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def get_dashboard_url(self) -> str | None:
        """sparkpoint: the URL of the job's dashboard while the job runs
        (``sparkpoint.dashboard.enabled``), else None."""
        server = self._server
        return server.dashboard_url if server is not None else None

    def get_rest_url(self) -> str | None:
        """sparkpoint: the URL of the job's REST API while the job runs
        (``sparkpoint.rest.enabled``; Flink's ``/jobs/...`` below it), else None."""
        server = self._server
        return server.rest_url if server is not None else None

    @property
    def job_master(self) -> JobMaster:
        """sparkpoint: the job master running the job (its ``progress`` has the live
        counters, for tools and demos)."""
        return self._master

    def get_job_id(self) -> str:
        return self._master.job_id

    def get_job_status(self) -> Future[JobStatus]:
        """The job's current status as PyFlink's ``JobStatus`` (the driver's own status
        enum has the same member names)."""
        fut: Future[JobStatus] = Future()
        fut.set_result(JobStatus[self._master.status.name])
        return fut

    def cancel(self) -> Future[None]:
        """Cancel at the next epoch boundary; checkpoints are kept or deleted per the
        externalized-checkpoint retention."""
        return self._master.request("cancel")

    def trigger_savepoint(
        self, savepoint_directory: str | None = None, formatType: Any = None
    ) -> Future[str]:
        """Take a (canonical) savepoint after the current epoch; the future gives its path."""
        return self._master.request("savepoint", savepoint_directory)

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        formatType: Any = None,
    ) -> Future[str]:
        """Take a synchronous savepoint and finish the job; with ``advance_to_end_of_event_time``
        (drain) the watermark goes to the maximum first, firing every event-time timer."""
        return self._master.request("stop", savepoint_directory, advance_to_end_of_event_time)

    def get_accumulators(self) -> Future[dict[str, Any]]:
        fut: Future[dict[str, Any]] = Future()
        fut.set_result({"epochs": self._progress.epochs_run, "restarts": self._progress.restarts})
        return fut

    def get_checkpoint_statistics(self) -> list[CheckpointStats]:
        """Per checkpoint: id, trigger time, duration, sizes, inline bytes, files and the
        size of every subtask's state (copies: they do not change afterwards)."""
        return self._progress.checkpoint_stats()

    def get_epoch_reports(self) -> list[EpochReport]:
        """sparkpoint: per finished epoch, where keyed tasks ran and what recovered."""
        return self._progress.epoch_reports()

    def get_failovers(self) -> list[FailoverEvent]:
        """sparkpoint: the whole-job failovers so far."""
        return self._progress.failovers()

    def get_metrics(self) -> dict[str, Any]:
        """sparkpoint: every metric of the job now, by Flink's identifier
        (``<job>.<operator>.<subtask>.<groups>.<name>``, ``<job>.<name>`` for job metrics;
        a distribution's value is a dict of count, sum, min, max and mean). Also readable
        after the job ended."""
        return metrics_by_identifier(self._progress)

    def get_metric_values(self) -> list[MetricValue]:
        """sparkpoint: the same metrics with their operator ids, kinds and group paths."""
        return metric_values(self._progress)

    def get_job_execution_result(self) -> Future[JobExecutionResult]:
        return self._result

    def wait(self, timeout: float | None = None) -> JobExecutionResult:
        """Block until the job ends; re-raises its failure."""
        return self._result.result(timeout)


def run_job(master: JobMaster, serve: ServeJob | None = None) -> JobExecutionResult:
    """Run ``master``'s job to its end in this thread (served by ``serve`` meanwhile)."""
    server = serve(master) if serve is not None else None
    report_started_job(
        master.job_id, master.progress.job_name, None if server is None else server.dashboard_url
    )
    try:
        return result_of(master.progress, master.run())
    finally:
        if server is not None:
            server.stop()


def result_of(progress: JobProgress, out: dict[str, Any]) -> JobExecutionResult:
    """The execution result of a finished master run (``out``: what ``run`` returned)."""
    return JobExecutionResult(
        job_id=progress.job_id,
        net_runtime_ms=out["net_runtime_ms"],
        epochs=out["epochs"],
        restarts=out["restarts"],
        records_in=out["records_in"],
        checkpoints=tuple(progress.checkpoint_stats()),
        epoch_reports=tuple(progress.epoch_reports()),
        failovers=tuple(progress.failovers()),
        materializations=tuple(progress.materializations()),
    )
