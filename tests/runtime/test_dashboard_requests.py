"""The dashboard's request checks (issue 29, item 6), over real sockets against the dashboard
of a running job: a Host header that names another site is answered 421 without data (DNS
rebinding), a dashboard bound beyond loopback is warned about once in the driver log, and a
client that goes away mid-request is one log line, not a traceback."""

from __future__ import annotations

import http.client
import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sparkpoint.runtime.driver.settings import ServerSettings
from sparkpoint.runtime.rest.job_server import JobServer
from sparkpoint.runtime.serving.host_check import HostCheck, beyond_loopback

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def running(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A job with its dashboard on 127.0.0.1, held before its third epoch."""
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.testing import Faults

    tmp = tmp_path_factory.mktemp("dashboard-requests")
    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", str(tmp / "local-state"))
    conf.set_string("sparkpoint.epoch.max-records-per-split", "10")
    conf.set_string("sparkpoint.dashboard.enabled", "true")
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(1)
    held, release = threading.Event(), threading.Event()

    def hold(event: Any) -> None:
        if event.epoch >= 3 and not release.is_set():
            held.set()
            release.wait(120)

    env.set_fault_injection(Faults().on_epoch_start(hold))
    env.from_collection(list(range(100))).map(lambda v: v + 1).print()
    client = env.execute_async("dashboard-requests")
    try:
        assert held.wait(120), "the job never reached epoch 3"
        yield client
    finally:
        release.set()
        client.get_job_execution_result().exception(120)


def _get(port: int, host: str | None, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, "/api/job", skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_only_requests_for_the_dashboards_own_address_are_answered(running: Any) -> None:
    port = int(running.get_dashboard_url().rsplit(":", 1)[1].strip("/"))
    answered = {
        host: _get(port, host)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}")
    }
    for host, (status, body) in answered.items():
        assert status == 200, host
        assert b'"job_name": "dashboard-requests"' in body, host
    refused = {
        host: _get(port, host, method)
        for host, method in [
            (f"evil.example:{port}", "GET"),
            ("evil.example", "HEAD"),
            (f"127.0.0.1.evil.example:{port}", "GET"),
            (f"localhost.evil.example:{port}", "POST"),
            ("127.0.0.1:1", "GET"),
            ("[::1", "GET"),
            (None, "GET"),
        ]
    }
    assert {host: status for host, (status, _b) in refused.items()} == dict.fromkeys(refused, 421)
    assert [body for _s, body in refused.values()] == [b""] * 7


def test_a_client_that_goes_away_is_one_log_line(
    running: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    port = int(running.get_dashboard_url().rsplit(":", 1)[1].strip("/"))
    caplog.set_level(logging.INFO, logger="sparkpoint.job")
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"GET /api/job HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
            time.sleep(0.2)  # the server waits for the rest of the headers
            # close with a reset (SO_LINGER 0): the server's read fails
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.time() + 10
    gone: list[str] = []
    while time.time() < deadline and len(gone) < 3:
        time.sleep(0.05)
        gone = [r.getMessage() for r in caplog.records if "went away" in r.getMessage()]
    assert len(gone) == 3, gone
    assert all(r.exc_info is None for r in caplog.records if "went away" in r.getMessage())
    assert "Traceback" not in capfd.readouterr().err
    assert _get(port, f"127.0.0.1:{port}")[0] == 200  # and it still serves


def test_binding_beyond_loopback_is_warned_once(
    running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    master = running.job_master
    caplog.set_level(logging.INFO, logger="sparkpoint.job")
    local = JobServer(master, ServerSettings("127.0.0.1", 0, dashboard=True))
    local.stop()
    assert not [r for r in caplog.records if "beyond" in r.getMessage()]
    wide = JobServer(master, ServerSettings("0.0.0.0", 0, dashboard=True))
    try:
        assert wide.dashboard_url is not None
        port = int(wide.dashboard_url.rsplit(":", 1)[1].strip("/"))
        assert _get(port, f"192.0.2.7:{port}")[0] == 200  # an IP literal cannot be rebound
        assert _get(port, f"{socket.gethostname()}:{port}")[0] == 200
        assert _get(port, f"evil.example:{port}")[0] == 421
        assert _get(port, f"127.0.0.1:{port}")[0] == 200
    finally:
        wide.stop()
    warned = [r for r in caplog.records if "beyond" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    assert "0.0.0.0" in warned[0].getMessage()


@pytest.mark.parametrize(
    ("host", "beyond"),
    [
        ("127.0.0.1", False),
        ("localhost", False),
        ("::1", False),
        ("127.0.0.2", False),
        ("0.0.0.0", True),
        ("::", True),
        ("10.1.2.3", True),
        ("dashboards.example", True),
    ],
)
def test_what_counts_as_beyond_loopback(host: str, beyond: bool) -> None:
    assert beyond_loopback(host) is beyond


def test_a_dashboard_bound_to_one_address_answers_that_address() -> None:
    check = HostCheck("10.1.2.3", 8080)
    assert [
        check.allows(h)
        for h in ("10.1.2.3:8080", "10.1.2.3", "localhost:8080", "10.1.2.4:8080", "x:8080", "")
    ] == [True, True, True, False, False, False]
