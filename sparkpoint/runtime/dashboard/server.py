"""The dashboard's answers for one job: ``/`` the page, ``/api/job`` the same figures as
JSON, ``/metrics`` the job's metrics in Prometheus's text format.

GET and HEAD only; every other method on these paths gets 405: nothing here changes the
job. The job's server (``runtime.rest.job_server``) serves these routes next to the REST
API's on one bounded server (``runtime.serving``), and ``/metrics`` alone on the Prometheus
reporter's port when the dashboard is off.
"""

from __future__ import annotations

import json
import threading
import time

from sparkpoint.metrics.prometheus import CONTENT_TYPE as PROMETHEUS_TYPE
from sparkpoint.metrics.prometheus import render as render_prometheus
from sparkpoint.runtime.dashboard.page import render_page
from sparkpoint.runtime.dashboard.view import JobView, RateMeter, job_view
from sparkpoint.runtime.driver.metric_values import metric_values
from sparkpoint.runtime.driver.progress import JobProgress
from sparkpoint.runtime.serving.bounded_server import Request, Response

__all__ = ["DashboardRoutes", "MetricsRoute"]

_PAGE_PATHS = ("/", "/index.html")
_CSP = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"}
_READ_ONLY = {"Allow": "GET, HEAD"}


def _refused(request: Request) -> Response | None:
    """405 for a method other than GET or HEAD (None: the request may be answered)."""
    if request.method in ("GET", "HEAD"):
        return None
    return Response(405, headers=_READ_ONLY)


class MetricsRoute:
    """``/metrics`` of the job whose ``progress`` is given (and nothing else)."""

    def __init__(self, progress: JobProgress) -> None:
        self._progress = progress

    def __call__(self, request: Request) -> Response | None:
        if request.path != "/metrics":
            return None
        refused = _refused(request)
        if refused is not None:
            return refused
        text = render_prometheus(metric_values(self._progress))
        return Response(200, text.encode("utf-8"), PROMETHEUS_TYPE)


class DashboardRoutes:
    """The page, ``/api/job`` and ``/metrics`` of the job whose ``progress`` is given;
    samples the job's rates every second until ``stop``."""

    def __init__(self, progress: JobProgress, refresh_ms: int) -> None:
        self._progress = progress
        self._refresh_ms = refresh_ms
        self._meter = RateMeter()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._metrics = MetricsRoute(progress)
        self._stopped = threading.Event()
        self._sampler = threading.Thread(
            target=self._sample, name=f"sparkpoint-dashboard-rates-{progress.job_id}", daemon=True
        )
        self._sampler.start()

    def view(self) -> JobView:
        """The job now (one view per request; the rate meter is shared)."""
        with self._lock:
            return job_view(self._progress, self._started, self._meter, self._refresh_ms)

    def __call__(self, request: Request) -> Response | None:
        if request.path not in (*_PAGE_PATHS, "/api/job"):
            return self._metrics(request)
        refused = _refused(request)
        if refused is not None:
            return refused
        if request.path == "/api/job":
            data = json.dumps(self.view().to_json(), indent=1).encode("utf-8")
            return Response(200, data, "application/json", _CSP)
        page = render_page(self.view()).encode("utf-8")
        return Response(200, page, "text/html; charset=utf-8", _CSP)

    def _sample(self) -> None:
        """Feed the rate meter every second, so rates need no earlier page load."""
        while True:
            with self._lock:
                self._meter.sample(self._progress.epochs_run, self._progress.records_in)
            if self._stopped.wait(1.0):
                return

    def stop(self) -> None:
        """Stop sampling."""
        self._stopped.set()
        self._sampler.join()
