"""The REST API of a job (issue 40, item 3) over real loopback sockets against a job
without Spark (``fake_job``: its requests are recorded and the test answers them): Flink's
paths and bodies, the token for every request that changes the job (401 without, 403 with
another), the Host check, the job's file in the jobs directory, and the ``sparkpoint``
commands ``list``, ``stop``, ``cancel`` and ``savepoint`` talking to it."""

from __future__ import annotations

import http.client
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.cli.main import main
from sparkpoint.errors import SparkpointError
from sparkpoint.runtime.driver.record_latency import PublishedLatency
from sparkpoint.runtime.driver.settings import ServerSettings
from sparkpoint.runtime.rest.job_server import JobServer
from tests.runtime.fake_job import FakeJob

JOB = "0f" * 16


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeJob, JobServer, int]]:
    settings = ServerSettings(rest=True, jobs_dir=str(tmp_path / "jobs"))
    job = FakeJob(settings)
    server = JobServer(job, settings)
    assert server.rest_url is not None and server.dashboard_url is None
    try:
        yield job, server, int(server.rest_url.rsplit(":", 1)[1].strip("/"))
    finally:
        server.stop()


def _call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    host: str | None = None,
) -> tuple[int, Any, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Host": host or f"127.0.0.1:{port}"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, data, headers)
        response = conn.getresponse()
        raw = response.read()
        kind = response.getheader("Content-Type") or ""
        return response.status, json.loads(raw) if kind == "application/json" else raw, response
    finally:
        conn.close()


def test_reading_needs_no_token(served: tuple[FakeJob, JobServer, int]) -> None:
    job, _server, port = served
    assert _call(port, "GET", "/jobs")[:2] == (200, {"jobs": [{"id": JOB, "status": "RUNNING"}]})
    status, overview, _r = _call(port, "GET", "/v1/jobs/overview")
    assert status == 200 and [j["jid"] for j in overview["jobs"]] == [JOB]
    status, details, _r = _call(port, "GET", f"/jobs/{JOB}")
    assert status == 200
    assert (details["jid"], details["name"], details["state"]) == (JOB, "fake-job", "RUNNING")
    status, body, _r = _call(port, "GET", "/jobs/feedbeef")
    assert status == 404 and "Job feedbeef not found" in body["errors"][0]
    assert _call(port, "GET", "/")[0] == 404  # no dashboard: the REST API alone
    assert job.requests == []


def test_job_metrics_by_flinks_path_and_get_parameter(
    served: tuple[FakeJob, JobServer, int],
) -> None:
    """Flink's ``GET /jobs/<id>/metrics``: the job-scope names, then values (as strings) of
    the names asked for; names the job lacks are left out."""
    job, _server, port = served
    status, names, _r = _call(port, "GET", f"/jobs/{JOB}/metrics")
    assert status == 200
    ids = [n["id"] for n in names]
    assert {"uptime", "numRestarts", "sparkpoint.lastCommitRecordLatencyMean"} <= set(ids)
    assert all(set(n) == {"id"} for n in names)
    wanted = "sparkpoint.lastCommitRecordLatencyMax,numRestarts,noSuchMetric"
    status, values, _r = _call(port, "GET", f"/v1/jobs/{JOB}/metrics?get={wanted}")
    assert (status, values) == (
        200,
        [
            {"id": "numRestarts", "value": "0"},
            {"id": "sparkpoint.lastCommitRecordLatencyMax", "value": "-1"},
        ],
    )
    job.progress.record_latency = PublishedLatency(900, 500, 100, 3, 0)
    status, values, _r = _call(port, "GET", f"/jobs/{JOB}/metrics?get={wanted}")
    assert values[1] == {"id": "sparkpoint.lastCommitRecordLatencyMax", "value": "900"}
    assert _call(port, "POST", f"/jobs/{JOB}/metrics", {})[0] == 405
    assert job.requests == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", f"/jobs/{JOB}?mode=cancel", None),
        ("POST", f"/jobs/{JOB}/stop", {"targetDirectory": "/tmp/sp", "drain": True}),
        ("POST", f"/jobs/{JOB}/savepoints", {"target-directory": "/tmp/sp"}),
    ],
)
def test_every_request_that_changes_the_job_needs_its_token(
    served: tuple[FakeJob, JobServer, int], method: str, path: str, body: Any
) -> None:
    job, server, port = served
    status, answer, response = _call(port, method, path, body)
    assert status == 401 and "Authorization: Bearer" in answer["errors"][0]
    assert response.getheader("WWW-Authenticate") == 'Bearer realm="sparkpoint"'
    status, answer, _r = _call(port, method, path, body, token="not-the-token")
    assert (status, answer) == (403, {"errors": ["The token sent is not this job's"]})
    status, _a, _r = _call(port, method, path, body, server.token, host=f"evil.example:{port}")
    assert status == 421
    assert job.requests == []  # nothing reached the job
    assert _call(port, method, path, body, server.token)[0] == 202
    assert len(job.requests) == 1


def test_stop_with_a_savepoint_and_its_status(served: tuple[FakeJob, JobServer, int]) -> None:
    job, server, port = served
    body = {"targetDirectory": "file:///tmp/sp", "drain": True}
    status, answer, _r = _call(port, "POST", f"/jobs/{JOB}/stop", body, server.token)
    assert status == 202
    trigger = answer["request-id"]
    [(kind, target, drain, future)] = job.requests
    assert (kind, target, drain) == ("stop", "file:///tmp/sp", True)
    status_path = f"/jobs/{JOB}/savepoints/{trigger}"
    assert _call(port, "GET", status_path)[1] == {
        "status": {"id": "IN_PROGRESS"},
        "operation": None,
    }
    future.set_result("file:///tmp/sp/savepoint-000003")
    assert _call(port, "GET", status_path)[1] == {
        "status": {"id": "COMPLETED"},
        "operation": {"location": "file:///tmp/sp/savepoint-000003"},
    }
    # a retried request with Flink's triggerId starts nothing new
    again = {"triggerId": "t-1"}
    for _ in range(2):
        assert _call(port, "POST", f"/jobs/{JOB}/savepoints", again, server.token)[1] == {
            "request-id": "t-1"
        }
    assert [r[:3] for r in job.requests[1:]] == [("savepoint", None, False)]
    job.requests[1][3].set_exception(SparkpointError("Job x is CANCELED; savepoint not done"))
    failed = _call(port, "GET", f"/jobs/{JOB}/savepoints/t-1")[1]
    assert failed["operation"]["failure-cause"] == {
        "class": "SparkpointError",
        "stack-trace": "Job x is CANCELED; savepoint not done",
    }
    assert _call(port, "GET", f"/jobs/{JOB}/savepoints/unknown")[0] == 404


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("stop", {"drain": "yes"}, "drain='yes': expected true or false"),
        ("stop", {"targetDir": "/x"}, "Unknown field(s) targetDir; allowed: drain, formatType"),
        ("stop", [1], "The request body must be a JSON object"),
        ("savepoints", {"cancel-job": True}, "cancel-job=true is not supported"),
        ("savepoints", {"formatType": "ZIP"}, "formatType='ZIP'; allowed: CANONICAL, NATIVE"),
        ("savepoints", {"target-directory": ""}, "target-directory='': expected a non-empty"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(
    served: tuple[FakeJob, JobServer, int], path: str, body: Any, message: str
) -> None:
    job, server, port = served
    status, answer, _r = _call(port, "POST", f"/jobs/{JOB}/{path}", body, server.token)
    assert status == 400 and answer["errors"][0].startswith(message)
    assert job.requests == []


def test_wrong_methods_get_405(served: tuple[FakeJob, JobServer, int]) -> None:
    _job, server, port = served
    status, _a, response = _call(port, "DELETE", f"/jobs/{JOB}", token=server.token)
    assert status == 405 and response.getheader("Allow") == "GET, PATCH"
    assert _call(port, "GET", f"/jobs/{JOB}/stop")[0] == 405
    assert _call(port, "POST", "/jobs", {}, server.token)[0] == 405


def test_the_jobs_file_is_private_and_removed_with_the_job(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    settings = ServerSettings(rest=True, jobs_dir=str(jobs))
    server = JobServer(FakeJob(settings), settings)
    path = jobs / f"{JOB}.json"
    try:
        assert stat.S_IMODE(jobs.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        written = json.loads(path.read_text())
        assert written == {
            "job_id": JOB,
            "job_name": "fake-job",
            "url": server.rest_url,
            "token": server.token,
        }
        assert len(server.token or "") >= 40
    finally:
        server.stop()
    assert not path.exists()
    jobs.chmod(0o755)
    with pytest.raises(SparkpointError, match=r"must be a directory of uid \d+ that only its"):
        JobServer(FakeJob(settings), settings)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_commands_find_the_job_by_its_file(
    served: tuple[FakeJob, JobServer, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job, _server, _port = served
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    code, out, err = _run(["list", *jobs], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["JOB", "ID", "STATUS", "STARTED", "(UTC)", "NAME", "REST", "API"]
    assert lines[1].split()[:2] == [JOB, "RUNNING"] and "fake-job" in lines[1]

    code, out, err = _run(["cancel", JOB, *jobs], capsys)
    assert (code, out) == (0, f"Cancelled job {JOB}.\n"), err
    assert [r[:3] for r in job.requests] == [("cancel", None, False)]

    def answer_when_asked(kind: str, location: str) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pending = [r for r in job.requests if r[0] == kind and not r[3].done()]
            if pending:
                pending[0][3].set_result(location)
                return
            time.sleep(0.05)

    for argv, kind, want in [
        (["stop", "--savepoint-path", "/sp", "--drain", JOB], "stop", ("stop", "/sp", True)),
        (["savepoint", JOB, "/sp2"], "savepoint", ("savepoint", "/sp2", False)),
        (["savepoint", "trigger", JOB], "savepoint", ("savepoint", None, False)),
    ]:
        answerer = threading.Thread(target=answer_when_asked, args=(kind, f"{want[1]}/sp-1"))
        answerer.start()
        code, out, err = _run([*argv, *jobs], capsys)
        answerer.join()
        assert code == 0, err
        assert out.splitlines()[-1] == f"Savepoint completed. Path: {want[1]}/sp-1"
        assert job.requests[-1][:3] == want


def test_the_commands_with_an_address_and_bad_tokens(
    served: tuple[FakeJob, JobServer, int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job, server, port = served
    empty = ["--jobs-dir", str(tmp_path / "none")]
    code, out, _err = _run(["list", *empty], capsys)
    assert (code, out) == (0, "No running jobs.\n")
    code, _out, err = _run(["cancel", JOB, *empty], capsys)
    assert code == 2 and f"No job {JOB} in {tmp_path / 'none'}" in err
    address = ["--address", f"127.0.0.1:{port}"]
    code, _out, err = _run(["cancel", JOB, *address], capsys)
    assert code == 2 and ": 401 This request changes the job" in err
    code, _out, err = _run(["cancel", JOB, *address, "--token", "wrong"], capsys)
    assert code == 2 and ": 403 The token sent is not this job's" in err
    assert job.requests == []
    monkeypatch.setenv("SPARKPOINT_REST_TOKEN", server.token or "")
    code, out, err = _run(["cancel", JOB, *address], capsys)
    assert (code, out) == (0, f"Cancelled job {JOB}.\n"), err
    code, out, _err = _run(["list", *address], capsys)
    assert code == 0 and JOB in out


def test_savepoint_dump_keeps_working(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(["savepoint", "dump", str(tmp_path / "missing"), "-o", "x"], capsys)
    assert code == 2 and "missing" in err  # dump's own error, not read as a job id
    assert not os.path.exists("x")


def test_the_result_of_a_stop_stays_readable_after_the_job_ended(tmp_path: Path) -> None:
    """``sparkpoint stop`` reads the savepoint's path after the job ended: the server waits
    (up to ``RESULT_GRACE_S``) until the result was read, then stops at once."""
    settings = ServerSettings(rest=True, jobs_dir=str(tmp_path / "jobs"))
    job = FakeJob(settings)
    server = JobServer(job, settings)
    port = int((server.rest_url or "").rsplit(":", 1)[1].strip("/"))
    body = {"drain": False}
    trigger = _call(port, "POST", f"/jobs/{JOB}/stop", body, server.token)[1]["request-id"]
    job.requests[0][3].set_result("/sp/savepoint-1")  # the job took it and ended
    stopping = threading.Thread(target=server.stop)
    started = time.monotonic()
    stopping.start()
    time.sleep(0.3)
    assert not (tmp_path / "jobs" / f"{JOB}.json").exists()  # no longer listed
    answer = _call(port, "GET", f"/jobs/{JOB}/savepoints/{trigger}")[1]
    assert answer["operation"] == {"location": "/sp/savepoint-1"}
    stopping.join(10)
    assert not stopping.is_alive() and time.monotonic() - started < 2.0


def test_list_notes_a_job_file_whose_driver_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = ServerSettings(rest=True, jobs_dir=str(tmp_path / "jobs"))
    server = JobServer(FakeJob(settings), settings)
    path = tmp_path / "jobs" / f"{JOB}.json"
    left = path.read_text()
    server.stop()
    path.write_text(left)  # as a driver that was killed leaves it
    path.chmod(0o600)
    code, out, err = _run(["list", "--jobs-dir", str(tmp_path / "jobs")], capsys)
    assert (code, out) == (0, "No running jobs.\n")
    assert "does not answer" in err and "ended without removing its file" in err
