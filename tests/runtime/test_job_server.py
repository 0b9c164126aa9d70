"""What the driver serves for a job (issue 39, item 3), over real loopback sockets against a
job without Spark (``fake_job``): the server keeps answering while 1,000 idle connections
are open, closes idle and slow connections after their time, the Prometheus reporter's port
serves ``/metrics`` and nothing else, and a server bound beyond loopback is warned about."""

from __future__ import annotations

import http.client
import logging
import resource
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from sparkpoint.runtime.driver.settings import ServerSettings
from sparkpoint.runtime.rest.job_server import JobServer
from sparkpoint.runtime.serving.bounded_server import ServerLimits
from tests.runtime.fake_job import FakeJob

IDLE = 1000


def _port(url: str | None) -> int:
    assert url is not None
    return int(url.rsplit(":", 1)[1].strip("/"))


def _get(port: int, path: str, method: str = "GET", host: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True)
        conn.putheader("Host", host or f"127.0.0.1:{port}")
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture
def enough_file_handles() -> Iterator[None]:
    """Room for this process's own 1,000 client sockets next to the server's: the soft
    RLIMIT_NOFILE is raised (up to the hard limit) for the test when it is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = IDLE + 512
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.fail(f"RLIMIT_NOFILE hard limit {hard} < {want}: raise it to run this test")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_dashboard_answers_while_1000_idle_connections_are_open(
    enough_file_handles: None,
) -> None:
    settings = ServerSettings(dashboard=True)
    server = JobServer(FakeJob(settings), settings)
    port = _port(server.dashboard_url)
    idle: list[socket.socket] = []
    try:
        started = time.monotonic()
        for _ in range(IDLE):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        opened_s = time.monotonic() - started
        answers = []
        for _ in range(5):
            t0 = time.monotonic()
            status, body = _get(port, "/api/job")
            answers.append((status, b'"job_name": "fake-job"' in body, time.monotonic() - t0))
        assert [(s, named) for s, named, _t in answers] == [(200, True)] * 5
        assert max(t for _s, _n, t in answers) < 2.0, answers
        assert opened_s < 30, f"{IDLE} connections took {opened_s:.1f} s to open"
        # the server holds at most its cap; the oldest idle connections were closed
        assert server._servers[0].open_connections() <= ServerLimits().max_connections
        closed = 0
        for sock in idle[:100]:
            sock.settimeout(5)
            try:
                closed += sock.recv(1) == b""
            except ConnectionResetError:
                closed += 1
        assert closed == 100
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def _fast_limits() -> ServerLimits:
    return ServerLimits(max_connections=8, idle_timeout_s=0.5, request_timeout_s=1.0, workers=2)


def test_an_idle_connection_is_closed_after_its_timeout() -> None:
    settings = ServerSettings(dashboard=True)
    server = JobServer(FakeJob(settings), settings, _fast_limits())
    try:
        with socket.create_connection(("127.0.0.1", _port(server.dashboard_url)), 10) as sock:
            started = time.monotonic()
            assert sock.recv(1) == b""  # closed by the server, nothing sent
            assert 0.4 < time.monotonic() - started < 3
    finally:
        server.stop()


def test_a_request_that_trickles_in_is_cut_at_its_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = ServerSettings(dashboard=True)
    server = JobServer(FakeJob(settings), settings, _fast_limits())
    port = _port(server.dashboard_url)
    caplog.set_level(logging.INFO, logger="sparkpoint.job")
    try:
        with socket.create_connection(("127.0.0.1", port), 10) as sock:
            started = time.monotonic()
            sock.sendall(b"GET /api/job HTTP/1.0\r\n")
            cut = None
            for _ in range(50):  # a header byte every 0.1 s: never a whole request
                try:
                    sock.sendall(b"X")
                except OSError:
                    cut = time.monotonic() - started
                    break
                time.sleep(0.1)
            if cut is None:
                sock.settimeout(5)
                assert sock.recv(100) == b""
                cut = time.monotonic() - started
            assert cut < 3.0
        assert any("took over 1 s for its request" in r.getMessage() for r in caplog.records)
        assert _get(port, "/api/job")[0] == 200  # and it still serves
    finally:
        server.stop()


def test_when_every_connection_is_busy_a_new_one_gets_503() -> None:
    settings = ServerSettings(dashboard=True)
    limits = ServerLimits(max_connections=2, idle_timeout_s=30, request_timeout_s=2, workers=2)
    server = JobServer(FakeJob(settings), settings, limits)
    port = _port(server.dashboard_url)
    try:
        busy = [socket.create_connection(("127.0.0.1", port), 10) for _ in range(2)]
        for sock in busy:
            sock.sendall(b"GET / HTTP/1.0\r\n")  # started, never finished
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", port), 10) as third:
            third.settimeout(5)
            assert third.recv(100).startswith(b"HTTP/1.0 503")
        for sock in busy:
            sock.close()
    finally:
        server.stop()


def test_the_prometheus_port_serves_metrics_and_nothing_else() -> None:
    settings = ServerSettings(prometheus_port=0)
    job = FakeJob(settings)
    server = JobServer(job, settings)
    try:
        assert server.dashboard_url is None and server.rest_url is None
        port = _port(server.metrics_url.rsplit("/", 1)[0] if server.metrics_url else None)
        status, text = _get(port, "/metrics")
        assert status == 200 and b'flink_jobmanager_job_sparkpoint_numEpochs{job_id="' in text
        answers = {
            path: _get(port, path)[0]
            for path in ("/", "/index.html", "/api/job", f"/jobs/{job.job_id}", "/jobs")
        }
        assert answers == dict.fromkeys(answers, 404)
        assert [_get(port, "/metrics", m)[0] for m in ("POST", "PUT", "DELETE")] == [405] * 3
        assert _get(port, "/metrics", host="evil.example")[0] == 421
    finally:
        server.stop()


def test_binding_beyond_loopback_is_warned(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sparkpoint.job")
    local = ServerSettings(dashboard=True, prometheus_port=0)
    JobServer(FakeJob(local), local).stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    wide = ServerSettings(host="0.0.0.0", dashboard=True)
    metrics = ServerSettings(host="0.0.0.0", prometheus_port=0)
    for settings in (wide, metrics):
        server = JobServer(FakeJob(settings), settings)
        server.stop()
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2, warned
    assert warned[0].startswith(f"Job {'0f' * 16}: the dashboard is bound to 0.0.0.0, beyond")
    assert warned[1].startswith(f"Job {'0f' * 16}: the Prometheus endpoint (/metrics) is bound")
    assert all("reverse proxy that authenticates" in w for w in warned)


def test_a_client_that_goes_away_is_one_log_line(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = ServerSettings(dashboard=True)
    server = JobServer(FakeJob(settings), settings)
    port = _port(server.dashboard_url)
    caplog.set_level(logging.INFO, logger="sparkpoint.job")
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(f"GET /api/job HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
                time.sleep(0.2)  # the server waits for the rest of the headers
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        deadline = time.time() + 10
        gone: list[logging.LogRecord] = []
        while time.time() < deadline and len(gone) < 3:
            time.sleep(0.05)
            gone = [r for r in caplog.records if "went away" in r.getMessage()]
        assert [r.getMessage() for r in gone] == [
            "dashboard: client 127.0.0.1 went away before its answer was sent "
            "(ConnectionResetError)"
        ] * 3
        assert all(r.exc_info is None for r in gone)
        assert "Traceback" not in capfd.readouterr().err
        assert _get(port, "/api/job")[0] == 200
    finally:
        server.stop()


def test_the_dashboard_is_read_only_and_answers_its_own_host_only() -> None:
    settings = ServerSettings(dashboard=True)
    server = JobServer(FakeJob(settings), settings)
    port = _port(server.dashboard_url)
    try:
        assert [_get(port, p)[0] for p in ("/", "/api/job", "/metrics")] == [200] * 3
        assert [_get(port, "/api/job", m)[0] for m in ("POST", "PUT", "DELETE", "PATCH")] == [
            405
        ] * 4
        assert _get(port, "/jobs")[0] == 404  # the REST API is off
        refused = [_get(port, "/api/job", host=h) for h in ("evil.example", f"x.test:{port}")]
        assert refused == [(421, b"")] * 2
    finally:
        server.stop()
