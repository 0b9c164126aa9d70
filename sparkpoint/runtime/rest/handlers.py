"""Flink's REST API for one running job, as far as controlling it from outside needs:

- ``GET /jobs``: ``{"jobs": [{"id", "status"}]}``; ``GET /jobs/overview``: with names and
  times; ``GET /jobs/<id>``: the job's details;
- ``PATCH /jobs/<id>?mode=cancel``: cancel (202);
- ``POST /jobs/<id>/stop`` ``{"targetDirectory", "drain"}``: stop with a savepoint;
- ``POST /jobs/<id>/savepoints`` ``{"target-directory"}``: trigger a savepoint;
- ``GET /jobs/<id>/savepoints/<triggerid>``: how a stop or savepoint went
  (``{"status": {"id": "IN_PROGRESS" | "COMPLETED"}, "operation": {"location"} or
  {"failure-cause"}}``);
- ``GET /jobs/<id>/metrics[?get=<name>,...]``: the job-scope metrics (``job_metrics.py``).

Paths may start with ``/v1`` as Flink's do. Reading needs nothing; every request that
changes the job (PATCH, POST) needs ``Authorization: Bearer <token>``: none is answered 401,
another token 403. The requests go to the job master's queue as the job client's do, so a
stop through here drains and commits as ``JobClient.stop_with_savepoint`` does.
"""

from __future__ import annotations

import collections
import hmac
import json
import threading
import time
import uuid
from concurrent.futures import CancelledError, Future
from typing import TYPE_CHECKING, Any, Protocol

from sparkpoint.runtime.rest.job_metrics import job_metrics_body
from sparkpoint.runtime.serving.bounded_server import Request, Response

if TYPE_CHECKING:
    from sparkpoint.runtime.driver.progress import JobProgress

__all__ = ["ControlledJob", "RestRoutes"]

_KEPT_TRIGGERS = 64  # finished stop/savepoint operations whose status stays readable
_STOP_FIELDS = {"targetDirectory", "drain", "formatType", "triggerId"}
_SAVEPOINT_FIELDS = {"target-directory", "cancel-job", "formatType", "triggerId"}
_FORMATS = ("CANONICAL", "NATIVE")


class ControlledJob(Protocol):
    """What the REST API reads and asks of a job (the ``JobMaster`` has it)."""

    @property
    def job_id(self) -> str: ...

    @property
    def job_name(self) -> str: ...

    @property
    def status(self) -> Any: ...  # JobStatus: its str() is Flink's name

    @property
    def progress(self) -> JobProgress: ...  # what the job has done: its metrics

    def request(self, kind: str, target: str | None = None, drain: bool = False) -> Future[Any]:
        """Queue a savepoint, stop or cancel (``runtime.driver.job_requests``)."""


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """Flink's error body: ``{"errors": [message]}``."""
    return Response.json(status, {"errors": [message]}, headers)


class RestRoutes:
    """Answers the REST API for ``job``; ``token`` authorises requests that change it."""

    def __init__(self, job: ControlledJob, token: str) -> None:
        self._job = job
        self._token = token.encode("utf-8")
        self._started_ms = int(time.time() * 1000)
        self._lock = threading.Lock()
        self._triggers: collections.OrderedDict[str, Future[Any]] = collections.OrderedDict()
        self._reported: set[str] = set()  # triggers whose result a client has read

    def unread_results(self) -> int:
        """Stops and savepoints that finished but whose result no client has read yet (the
        job's server waits a little for them when the job ends)."""
        with self._lock:
            return sum(1 for t, f in self._triggers.items() if f.done() and t not in self._reported)

    def __call__(self, request: Request) -> Response | None:
        parts = [p for p in request.path.split("/") if p]
        if parts[:1] == ["v1"]:
            parts = parts[1:]
        if parts[:1] != ["jobs"]:
            return None
        try:
            return self._route(request, parts[1:])
        except _BadRequest as exc:
            return _error(exc.status, str(exc), exc.headers)

    # -- routing ----------------------------------------------------------------------------
    def _route(self, request: Request, parts: list[str]) -> Response:
        method = request.method
        if not parts:
            self._only(method, "GET")
            return Response.json(200, {"jobs": [{"id": self._job.job_id, "status": self._state()}]})
        if parts == ["overview"]:
            self._only(method, "GET")
            return Response.json(200, {"jobs": [self._details()]})
        job_id, rest = parts[0], parts[1:]
        if job_id != self._job.job_id:
            raise _BadRequest(
                404, f"Job {job_id} not found (this server runs job {self._job.job_id})"
            )
        if not rest:
            self._only(method, "GET", "PATCH")
            if method == "PATCH":
                return self._cancel(request)
            return Response.json(200, self._details())
        if rest == ["stop"]:
            self._only(method, "POST")
            return self._stop(request)
        if rest == ["savepoints"]:
            self._only(method, "POST")
            return self._savepoint(request)
        if len(rest) == 2 and rest[0] == "savepoints":
            self._only(method, "GET")
            return self._status(rest[1])
        if rest == ["metrics"]:
            self._only(method, "GET")
            body = job_metrics_body(self._job.progress, request.query.get("get"))
            return Response.json(200, body)
        raise _BadRequest(404, f"Not found: {request.path}")

    @staticmethod
    def _only(method: str, *allowed: str) -> None:
        if method == "HEAD" and "GET" in allowed:
            return
        if method not in allowed:
            allow = ", ".join(allowed)
            raise _BadRequest(
                405, f"Method {method} not allowed here (allowed: {allow})", {"Allow": allow}
            )

    def _authorise(self, request: Request) -> None:
        """Raise 401 without a bearer token, 403 with another than the job's."""
        header = request.headers.get("Authorization") or ""
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise _BadRequest(
                401,
                "This request changes the job: send its token as 'Authorization: Bearer "
                "<token>' (the token is in the job's file in the jobs directory)",
                {"WWW-Authenticate": 'Bearer realm="sparkpoint"'},
            )
        if not hmac.compare_digest(given.strip().encode("utf-8"), self._token):
            raise _BadRequest(403, "The token sent is not this job's")

    # -- reading ------------------------------------------------------------------------------
    def _state(self) -> str:
        return str(self._job.status)

    def _details(self) -> dict[str, Any]:
        now = int(time.time() * 1000)
        return {
            "jid": self._job.job_id,
            "name": self._job.job_name,
            "state": self._state(),
            "start-time": self._started_ms,
            "end-time": -1,
            "duration": now - self._started_ms,
            "now": now,
        }

    def _status(self, trigger_id: str) -> Response:
        with self._lock:
            future = self._triggers.get(trigger_id)
        if future is None:
            raise _BadRequest(404, f"No savepoint or stop with trigger id {trigger_id} on this job")
        if not future.done():
            return Response.json(200, {"status": {"id": "IN_PROGRESS"}, "operation": None})
        with self._lock:
            self._reported.add(trigger_id)
        exc = future.exception() if not future.cancelled() else CancelledError("cancelled")
        if exc is None:
            operation: dict[str, Any] = {"location": future.result()}
        else:
            operation = {"failure-cause": {"class": type(exc).__name__, "stack-trace": str(exc)}}
        return Response.json(200, {"status": {"id": "COMPLETED"}, "operation": operation})

    # -- changing the job ----------------------------------------------------------------------
    def _cancel(self, request: Request) -> Response:
        self._authorise(request)
        mode = request.query.get("mode", "cancel")
        if mode != "cancel":
            raise _BadRequest(400, f"mode={mode!r} is not supported; allowed: cancel")
        self._job.request("cancel")
        return Response.json(202, {})

    def _stop(self, request: Request) -> Response:
        self._authorise(request)
        body = _body(request, _STOP_FIELDS)
        target = _optional_string(body, "targetDirectory")
        drain = _boolean(body, "drain")
        return self._trigger(body, lambda: self._job.request("stop", target, drain))

    def _savepoint(self, request: Request) -> Response:
        self._authorise(request)
        body = _body(request, _SAVEPOINT_FIELDS)
        target = _optional_string(body, "target-directory")
        if _boolean(body, "cancel-job"):
            raise _BadRequest(
                400,
                "cancel-job=true is not supported (Flink deprecates cancel with savepoint): "
                "use POST /jobs/<id>/stop",
            )
        return self._trigger(body, lambda: self._job.request("savepoint", target))

    def _trigger(self, body: dict[str, Any], start: Any) -> Response:
        """Start an operation once per trigger id (Flink's ``triggerId``: a retried request
        with the same id gets the same operation)."""
        given = _optional_string(body, "triggerId")
        trigger_id = given or uuid.uuid4().hex
        with self._lock:
            if trigger_id not in self._triggers:
                self._triggers[trigger_id] = start()
                self._forget_finished()
        return Response.json(202, {"request-id": trigger_id})

    def _forget_finished(self) -> None:
        """Keep at most ``_KEPT_TRIGGERS`` operations (finished ones go first, oldest first)."""
        excess = len(self._triggers) - _KEPT_TRIGGERS
        for trigger_id in [t for t, f in self._triggers.items() if f.done()][: max(excess, 0)]:
            del self._triggers[trigger_id]
            self._reported.discard(trigger_id)


def _body(request: Request, allowed: set[str]) -> dict[str, Any]:
    """The request's JSON object (an empty body is ``{}``); unknown fields are refused."""
    if not request.body.strip():
        return {}
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _BadRequest(400, f"The request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise _BadRequest(400, "The request body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _BadRequest(
            400, f"Unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    fmt = body.get("formatType")
    if fmt is not None and fmt not in _FORMATS:
        raise _BadRequest(400, f"formatType={fmt!r}; allowed: {', '.join(_FORMATS)}")
    return body


def _optional_string(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        raise _BadRequest(400, f"{name}={value!r}: expected a non-empty string or null")
    return value


def _boolean(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise _BadRequest(400, f"{name}={value!r}: expected true or false")
    return value
