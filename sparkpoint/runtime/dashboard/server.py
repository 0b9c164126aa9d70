"""The dashboard server: a read-only web page of one job, served by the driver while the
job runs (``sparkpoint.dashboard.*`` options).

Standard library ``http.server`` on a background thread. It answers GET (and HEAD) only —
``/`` the page, ``/api/job`` the same figures as JSON, ``/metrics`` the job's metrics in
Prometheus's text format — and every other method with 405: nothing on it changes the job.
It binds to 127.0.0.1 unless configured otherwise; port 0 takes any free port, and the URL
is logged and given by the job client. A request whose Host header names another site is
answered 421 without data (``host_check``: DNS rebinding); binding beyond loopback is warned
about in the driver log; a client that goes away mid-answer is one log line.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from sparkpoint.errors import SparkpointError
from sparkpoint.metrics.prometheus import CONTENT_TYPE as PROMETHEUS_TYPE
from sparkpoint.metrics.prometheus import render as render_prometheus
from sparkpoint.runtime.dashboard.host_check import HostCheck, beyond_loopback
from sparkpoint.runtime.dashboard.page import render_page
from sparkpoint.runtime.dashboard.view import JobView, RateMeter, job_view
from sparkpoint.runtime.driver.metric_values import metric_values

if TYPE_CHECKING:  # the driver's settings import this module: no run-time import back
    from sparkpoint.runtime.driver.progress import JobProgress

__all__ = ["Dashboard", "DashboardSettings", "start_dashboard"]

_LOG = logging.getLogger("sparkpoint.job")


@dataclass(frozen=True)
class DashboardSettings:
    """Where to serve a job's dashboard."""

    host: str = "127.0.0.1"
    port: int = 0
    refresh_ms: int = 2000


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        if self._host_allowed():
            self._answer(body=True)

    def do_HEAD(self) -> None:
        if self._host_allowed():
            self._answer(body=False)

    def _host_allowed(self) -> bool:
        """Answer 421 (and nothing else) unless the Host header names this server."""
        if self.server.host_check.allows(self.headers.get("Host")):
            return True
        _LOG.info(
            "dashboard: refused a request from %s for Host %r (not the dashboard's address)",
            self.client_address[0],
            self.headers.get("Host"),
        )
        self.send_response(421)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        return False

    def _refuse(self) -> None:
        if not self._host_allowed():
            return
        self.send_response(405)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _answer(self, body: bool) -> None:
        path = self.path.split("?", 1)[0]
        dashboard = self.server.dashboard
        if path in ("/", "/index.html"):
            data = render_page(dashboard.view()).encode("utf-8")
            kind = "text/html; charset=utf-8"
        elif path == "/api/job":
            data = json.dumps(dashboard.view().to_json(), indent=1).encode("utf-8")
            kind = "application/json"
        elif path == "/metrics":
            data = render_prometheus(metric_values(dashboard.progress)).encode("utf-8")
            kind = PROMETHEUS_TYPE
        else:
            self.send_error(404, "Not found")
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        _LOG.debug("dashboard: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    dashboard: Dashboard
    host_check: HostCheck

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is one line; any other error keeps its traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            _LOG.info(
                "dashboard: client %s went away before its answer was sent (%s)",
                client_address[0],
                type(exc).__name__,
            )
            return
        _LOG.warning("dashboard: error answering %s", client_address[0], exc_info=exc)


class Dashboard:
    """Serves the dashboard of the job whose ``progress`` is given until ``stop``."""

    def __init__(self, progress: JobProgress, settings: DashboardSettings) -> None:
        self._progress = progress
        self.settings = settings
        self._meter = RateMeter()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        try:
            self._server = _Server((settings.host, settings.port), _Handler)
        except OSError as exc:
            raise SparkpointError(
                f"Cannot serve the dashboard on {settings.host}:{settings.port} "
                f"(sparkpoint.dashboard.host, sparkpoint.dashboard.port): {exc}"
            ) from exc
        self._server.dashboard = self
        host, port = str(self._server.server_address[0]), int(self._server.server_address[1])
        self._server.host_check = HostCheck(settings.host, port)
        if beyond_loopback(settings.host):
            _LOG.warning(
                "Job %s: the dashboard is bound to %s, beyond this machine's loopback: "
                "anyone who can reach port %d can read the job's figures "
                "(sparkpoint.dashboard.host = 127.0.0.1 keeps it local)",
                progress.job_id,
                settings.host,
                port,
            )
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"sparkpoint-dashboard-{port}", daemon=True
        )
        self._thread.start()
        self._stopped = threading.Event()
        self._sampler = threading.Thread(
            target=self._sample, name=f"sparkpoint-dashboard-rates-{port}", daemon=True
        )
        self._sampler.start()
        _LOG.info("Job %s (%s): dashboard at %s", progress.job_id, progress.job_name, self.url)

    @property
    def progress(self) -> JobProgress:
        """The job this dashboard shows."""
        return self._progress

    def view(self) -> JobView:
        """The job now (one view per request; the rate meter is shared)."""
        with self._lock:
            return job_view(self._progress, self._started, self._meter, self.settings.refresh_ms)

    def _sample(self) -> None:
        """Feed the rate meter every second, so rates need no earlier page load."""
        while True:
            with self._lock:
                self._meter.sample(self._progress.epochs_run, self._progress.records_in)
            if self._stopped.wait(1.0):
                return

    def stop(self) -> None:
        """Stop serving (the port is released)."""
        self._stopped.set()
        self._sampler.join()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def start_dashboard(progress: JobProgress, settings: DashboardSettings | None) -> Dashboard | None:
    """The dashboard of the job whose ``progress`` is given, if ``settings`` ask for one
    (else None)."""
    return Dashboard(progress, settings) if settings is not None else None
