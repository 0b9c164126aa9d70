"""``sparkpoint list``, ``stop``, ``cancel`` and ``savepoint JOB [DIR]``: Flink's commands for
running jobs, through the REST API of the job's driver (``sparkpoint.rest.enabled``).

Where a job is served and its token come from ``--address`` and ``--token`` (or
``$SPARKPOINT_REST_ADDRESS`` and ``$SPARKPOINT_REST_TOKEN``), else from the job's file in
the jobs directory the driver writes on its host (``--jobs-dir``, else
``$SPARKPOINT_JOBS_DIR``, else ``~/.sparkpoint/jobs``). A stop or savepoint waits for the
savepoint and prints its path, as ``flink stop`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.cli.text import printable
from sparkpoint.errors import SparkpointError
from sparkpoint.runtime.rest.job_files import JobFile, default_jobs_dir, read_job_files

__all__ = ["ADDRESS_ENV", "TOKEN_ENV", "add_arguments", "add_savepoint_trigger"]

ADDRESS_ENV = "SPARKPOINT_REST_ADDRESS"
TOKEN_ENV = "SPARKPOINT_REST_TOKEN"
_POLL_S = 0.5
# Straight to the driver, never through $http_proxy: the requests carry the job's token.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class _Endpoint:
    url: str  # ends with /
    token: str | None


def _call(
    endpoint: _Endpoint, method: str, path: str, body: Mapping[str, Any] | None = None
) -> Any:
    """The JSON answer of one request; ``SparkpointError`` with the server's message when
    it answers an error or cannot be reached."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(urllib.parse.urljoin(endpoint.url, path), data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if endpoint.token and method not in ("GET", "HEAD"):
        request.add_header("Authorization", f"Bearer {endpoint.token}")
    try:
        with _OPENER.open(request, timeout=30) as response:
            text = response.read()
    except urllib.error.HTTPError as exc:
        raise SparkpointError(
            f"{method} {request.full_url}: {exc.code} {_errors(exc.read()) or exc.reason}"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SparkpointError(f"{request.full_url} does not answer: {reason}") from None
    return json.loads(text) if text.strip() else {}


def _errors(body: bytes) -> str:
    try:
        return "; ".join(str(e) for e in json.loads(body)["errors"])
    except (ValueError, KeyError, TypeError):
        return body.decode("utf-8", "replace").strip()


def _explicit(args: argparse.Namespace) -> _Endpoint | None:
    address = args.address or os.environ.get(ADDRESS_ENV)
    if not address:
        return None
    if "://" not in address:
        address = f"http://{address}"
    token = args.token or os.environ.get(TOKEN_ENV)
    return _Endpoint(address.rstrip("/") + "/", token)


def _job_files(args: argparse.Namespace) -> list[JobFile]:
    return read_job_files(default_jobs_dir(args.jobs_dir))


def _endpoint_of(args: argparse.Namespace, job_id: str) -> _Endpoint:
    """Where ``job_id`` is served: the address given, else its file in the jobs directory."""
    explicit = _explicit(args)
    if explicit is not None:
        return explicit
    for job in _job_files(args):
        if job.job_id == job_id:
            return _Endpoint(job.url, args.token or os.environ.get(TOKEN_ENV) or job.token)
    directory = default_jobs_dir(args.jobs_dir)
    raise SparkpointError(
        f"No job {job_id} in {directory} (jobs served with sparkpoint.rest.enabled on this "
        f"host); give the driver's address with --address/${ADDRESS_ENV} and the token "
        f"with --token/${TOKEN_ENV}"
    )


def _cmd_list(args: argparse.Namespace) -> int:
    explicit = _explicit(args)
    endpoints = [explicit] if explicit else [_Endpoint(j.url, j.token) for j in _job_files(args)]
    rows = []
    for endpoint in endpoints:
        try:
            jobs = _call(endpoint, "GET", "jobs/overview")["jobs"]
        except SparkpointError as exc:
            if explicit:
                raise
            print(
                f"note: {exc} (a job whose driver ended without removing its file?)",
                file=sys.stderr,
            )
            continue
        for job in jobs:
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(job["start-time"] / 1000))
            rows.append((job["jid"], job["state"], started, job["name"], endpoint.url))
    if not rows:
        print("No running jobs.")
        return 0
    header = ("JOB ID", "STATUS", "STARTED (UTC)", "NAME", "REST API")
    table = [header] + [tuple(printable(str(v)) for v in row) for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for row in table:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _wait(endpoint: _Endpoint, job_id: str, trigger: str, timeout_s: float) -> str:
    """The savepoint's path once the operation ``trigger`` completed."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = _call(endpoint, "GET", f"jobs/{job_id}/savepoints/{trigger}")
        if answer["status"]["id"] == "COMPLETED":
            operation = answer["operation"]
            if "failure-cause" in operation:
                cause = operation["failure-cause"]
                raise SparkpointError(f"Savepoint failed: {cause['class']}: {cause['stack-trace']}")
            return str(operation["location"])
        if time.monotonic() > deadline:
            raise SparkpointError(
                f"No savepoint after {timeout_s:.0f} s (trigger {trigger}); the job goes on "
                f"with it: ask later with GET jobs/{job_id}/savepoints/{trigger}"
            )
        time.sleep(_POLL_S)


def _cmd_stop(args: argparse.Namespace) -> int:
    endpoint = _endpoint_of(args, args.job)
    print(f"Suspending job {args.job}{' (draining)' if args.drain else ''}.")
    body = {"targetDirectory": args.savepoint_path, "drain": args.drain}
    trigger = _call(endpoint, "POST", f"jobs/{args.job}/stop", body)["request-id"]
    print(f"Savepoint completed. Path: {_wait(endpoint, args.job, trigger, args.timeout)}")
    return 0


def _cmd_cancel(args: argparse.Namespace) -> int:
    endpoint = _endpoint_of(args, args.job)
    _call(endpoint, "PATCH", f"jobs/{args.job}?mode=cancel")
    print(f"Cancelled job {args.job}.")
    return 0


def _cmd_savepoint(args: argparse.Namespace) -> int:
    endpoint = _endpoint_of(args, args.job)
    print(f"Triggering savepoint for job {args.job}.")
    body = {"target-directory": args.directory}
    trigger = _call(endpoint, "POST", f"jobs/{args.job}/savepoints", body)["request-id"]
    print(f"Savepoint completed. Path: {_wait(endpoint, args.job, trigger, args.timeout)}")
    return 0


def _add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        default=None,
        help=f"the driver's REST address, host:port or URL (${ADDRESS_ENV}); default: the "
        "job's file in the jobs directory",
    )
    parser.add_argument(
        "--token", default=None, help=f"the job's token (${TOKEN_ENV}); default: the job's file"
    )
    parser.add_argument(
        "--jobs-dir",
        default=None,
        help="where drivers on this host write their jobs' files (default: "
        "$SPARKPOINT_JOBS_DIR, else ~/.sparkpoint/jobs)",
    )


def _add_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for the savepoint (600)"
    )


def add_arguments(commands: Any) -> None:
    """Register ``list``, ``stop`` and ``cancel`` on the top-level subparsers."""
    p = commands.add_parser("list", help="list running jobs (REST API of their drivers)")
    _add_endpoint_options(p)
    p.set_defaults(handler=_cmd_list)

    p = commands.add_parser("stop", help="stop a job with a savepoint")
    p.add_argument("job", help="the job's id")
    p.add_argument(
        "--savepoint-path", "-p", default=None, help="savepoint directory (default: configured)"
    )
    p.add_argument(
        "--drain", "-d", action="store_true", help="advance to the end of event time first"
    )
    _add_endpoint_options(p)
    _add_timeout(p)
    p.set_defaults(handler=_cmd_stop)

    p = commands.add_parser("cancel", help="cancel a job")
    p.add_argument("job", help="the job's id")
    _add_endpoint_options(p)
    p.set_defaults(handler=_cmd_cancel)


def add_savepoint_trigger(actions: Any) -> None:
    """Register ``trigger`` on the ``savepoint`` subparsers (``sparkpoint savepoint JOB
    [DIR]`` is read as ``sparkpoint savepoint trigger JOB [DIR]``)."""
    p = actions.add_parser(
        "trigger", help="take a savepoint of a running job (also: sparkpoint savepoint JOB [DIR])"
    )
    p.add_argument("job", help="the job's id")
    p.add_argument("directory", nargs="?", default=None, help="savepoint directory")
    _add_endpoint_options(p)
    _add_timeout(p)
    p.set_defaults(handler=_cmd_savepoint)
