"""What the driver serves for one job, started with the job and stopped when it ends: the
job's server (the dashboard and the REST API, one bounded server on
``sparkpoint.dashboard.host``:``port``) and, when the Prometheus reporter is on with the
dashboard off, ``/metrics`` alone on the reporter's port.

A server bound beyond loopback is warned about in the driver log: what it shows is not
authenticated (only the REST API's requests that change the job need the job's token), so
it belongs behind a reverse proxy that authenticates. With the REST API on, the job's
address and token go to the jobs directory (``job_files``) until the job ends.
"""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path
from typing import Protocol

from sparkpoint.errors import SparkpointError
from sparkpoint.runtime.dashboard.server import DashboardRoutes, MetricsRoute
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.driver.settings import ServerSettings
from sparkpoint.runtime.rest.handlers import ControlledJob, RestRoutes
from sparkpoint.runtime.rest.job_files import (
    JobFile,
    default_jobs_dir,
    remove_job_file,
    write_job_file,
)
from sparkpoint.runtime.serving.bounded_server import BoundedServer, Route, ServerLimits
from sparkpoint.runtime.serving.host_check import beyond_loopback

__all__ = ["JobServer", "ServedJob", "serve_job"]

_LOG = logging.getLogger("sparkpoint.job")
_ADDRESS_KEYS = "sparkpoint.dashboard.host, sparkpoint.dashboard.port"
_PROMETHEUS_KEYS = "sparkpoint.dashboard.host, metrics.reporter.prom.port"
# When the job ends, how long the REST API stays up for a client to read the result of a
# stop or savepoint it asked for (``sparkpoint stop`` polls every 0.5 s).
RESULT_GRACE_S = 5.0


class ServedJob(ControlledJob, Protocol):
    """What the job's server reads (the ``JobMaster`` has it)."""

    @property
    def progress(self) -> JobProgress: ...

    @property
    def server_settings(self) -> ServerSettings: ...


def _client_url(server: BoundedServer) -> str:
    """The URL a client on this host uses (a wildcard address is reached on loopback)."""
    host = server.host.strip("[]")
    if host in ("0.0.0.0", ""):
        return f"http://127.0.0.1:{server.port}/"
    if host == "::":
        return f"http://[::1]:{server.port}/"
    return server.url


class JobServer:
    """Serves ``job`` as its ``settings`` say until ``stop``."""

    def __init__(
        self, job: ServedJob, settings: ServerSettings, limits: ServerLimits | None = None
    ) -> None:
        self._job = job
        self._servers: list[BoundedServer] = []
        self._dashboard: DashboardRoutes | None = None
        self._rest: RestRoutes | None = None
        self._job_file: Path | None = None
        self.dashboard_url: str | None = None
        self.rest_url: str | None = None
        self.metrics_url: str | None = None
        self.token: str | None = None
        try:
            if settings.job_server:
                self._start_job_server(settings, limits)
            if settings.prometheus_port is not None:
                server = self._bind(
                    settings.host,
                    settings.prometheus_port,
                    [MetricsRoute(job.progress)],
                    "metrics",
                    _PROMETHEUS_KEYS,
                    limits,
                )
                self._warn_if_exposed(
                    server, "the Prometheus endpoint (/metrics)", "the job's metrics"
                )
                self.metrics_url = f"{server.url}metrics"
                _LOG.info("Job %s: metrics at %s", job.job_id, self.metrics_url)
        except BaseException:
            self.stop()
            raise

    def _start_job_server(self, settings: ServerSettings, limits: ServerLimits | None) -> None:
        job = self._job
        routes: list[Route] = []
        if settings.dashboard:
            self._dashboard = DashboardRoutes(job.progress, settings.refresh_ms)
            routes.append(self._dashboard)
        if settings.rest:
            self.token = secrets.token_urlsafe(32)
            self._rest = RestRoutes(job, self.token)
            routes.append(self._rest)
        name = "dashboard" if settings.dashboard else "rest"
        server = self._bind(settings.host, settings.port, routes, name, _ADDRESS_KEYS, limits)
        what = "the dashboard" if settings.dashboard else "the REST API"
        shown = "the job's figures, names and paths" if settings.dashboard else "the job's status"
        self._warn_if_exposed(server, what, shown)
        if settings.dashboard:
            self.dashboard_url = server.url
            _LOG.info("Job %s (%s): dashboard at %s", job.job_id, job.job_name, server.url)
        if settings.rest:
            assert self.token is not None
            self.rest_url = _client_url(server)
            directory = default_jobs_dir(settings.jobs_dir)
            self._job_file = write_job_file(
                directory, JobFile(job.job_id, job.job_name, self.rest_url, self.token, "")
            )
            _LOG.info(
                "Job %s (%s): REST API at %s (address and token in %s)",
                job.job_id,
                job.job_name,
                self.rest_url,
                self._job_file,
            )

    def _bind(
        self,
        host: str,
        port: int,
        routes: list[Route],
        name: str,
        keys: str,
        limits: ServerLimits | None,
    ) -> BoundedServer:
        try:
            server = BoundedServer(host, port, routes, name, limits)
        except OSError as exc:
            raise SparkpointError(
                f"Cannot serve the {name} on {host}:{port} ({keys}): {exc}"
            ) from exc
        self._servers.append(server)
        return server

    def _warn_if_exposed(self, server: BoundedServer, what: str, shown: str) -> None:
        if beyond_loopback(server.host):
            _LOG.warning(
                "Job %s: %s is bound to %s, beyond this machine's loopback: anyone who can "
                "reach port %d can read %s without authentication. Put a reverse proxy that "
                "authenticates in front of it, or keep it local with "
                "sparkpoint.dashboard.host = 127.0.0.1",
                self._job.job_id,
                what,
                server.host,
                server.port,
                shown,
            )

    def stop(self) -> None:
        """Stop serving: ports released, the job's file removed. A stop or savepoint whose
        result no client has read yet keeps the server up to ``RESULT_GRACE_S`` longer."""
        if self._job_file is not None:
            remove_job_file(self._job_file)
            self._job_file = None
        deadline = time.monotonic() + RESULT_GRACE_S
        while self._rest is not None and self._rest.unread_results():
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        for server in self._servers:
            server.stop()
        self._servers = []
        if self._dashboard is not None:
            self._dashboard.stop()
            self._dashboard = None


def serve_job(job: ServedJob) -> JobServer | None:
    """Start what ``job``'s settings ask to serve (None: nothing)."""
    settings = job.server_settings
    if not settings.job_server and settings.prometheus_port is None:
        return None
    return JobServer(job, settings)
