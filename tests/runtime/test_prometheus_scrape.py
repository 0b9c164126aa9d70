"""Debian's Prometheus scrapes a running job's ``/metrics`` (Flink's reporter keys, no
dashboard): what it stores equals what the job client says, and the endpoint is GET-only.

The job is held before epoch ``PAUSE_AT`` by a driver hook, so its metrics stand still
while Prometheus scrapes (every second) and the test reads them back through Prometheus's
HTTP API. ``prometheus`` is installed on first use (``tests/fixtures/system.py``); the test
fails, never skips, without it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.datastream import CheckpointingMode, FileSystemCheckpointStorage
from sparkpoint.testing import Faults
from tests.fixtures.system import debian_package
from tests.runtime.jobs.metric_jobs import metrics_job

N = 100_000
PAUSE_AT = 4
FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"

pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, method: str = "GET") -> tuple[int, str]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except urllib.error.URLError:  # not listening (yet)
        return 0, ""


def _start_prometheus(tmp: Path, target_port: int) -> tuple[subprocess.Popen[bytes], str]:
    binary = debian_package("prometheus", "prometheus")
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: sparkpoint\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )
    port = _free_port()
    with open(tmp / "prometheus.log", "wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return process, f"http://127.0.0.1:{port}"


def _query(api: str, expr: str) -> list[dict[str, Any]]:
    status, body = _get(f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    if status != 200:
        return []
    return list(json.loads(body)["data"]["result"])


def _scraped(api: str, expr: str, want: float, timeout: float = 60) -> float | None:
    """The value of ``expr`` once Prometheus has scraped it equal to ``want`` (or the last
    value seen when the time is up)."""
    deadline, seen = time.time() + timeout, None
    while time.time() < deadline:
        result = _query(api, expr)
        if result:
            seen = float(result[0]["value"][1])
            if seen == want:
                return seen
        time.sleep(0.5)
    return seen


def test_prometheus_reads_what_the_job_client_says(env: Any, tmp_path: Path) -> None:
    reporter_port = _free_port()
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage(
        FileSystemCheckpointStorage((tmp_path / "ckpt").as_uri())
    )
    env.configure(
        {
            "sparkpoint.epoch.max-records-per-split": "500",
            "metrics.reporter.prom.factory.class": FACTORY,
            "metrics.reporter.prom.port": str(reporter_port),
        }
    )
    paused, release = threading.Event(), threading.Event()

    def hold(event: Any) -> None:
        if event.epoch >= PAUSE_AT and not release.is_set():
            paused.set()
            release.wait(300)

    env.set_fault_injection(Faults().on_epoch_start(hold))
    metrics_job(env, str(tmp_path / "out"), N)
    client = env.execute_async("scraped")
    prometheus = None
    try:
        assert paused.wait(240), f"the job never reached epoch {PAUSE_AT}"
        endpoint = f"http://127.0.0.1:{reporter_port}/metrics"
        assert client.get_dashboard_url() is None  # the reporter's port is not a dashboard
        status, text = _get(endpoint)
        assert status == 200 and "flink_taskmanager_job_task_operator_parser_records{" in text
        for path in ("/", "/api/job"):  # /metrics and nothing else
            assert _get(f"http://127.0.0.1:{reporter_port}{path}")[0] == 404, path
        for method in ("POST", "PUT", "DELETE"):
            assert _get(endpoint, method)[0] == 405, method
        prometheus, api = _start_prometheus(tmp_path, reporter_port)

        metrics = client.get_metrics()
        read = sum(r.records_in for r in client.get_epoch_reports())
        assert read > 0
        counted = _scraped(
            api,
            'sum(flink_taskmanager_job_task_operator_parser_records{operator_name="parse"})',
            read,
        )
        assert counted == read  # the user counter: every record the map saw
        for operator in ("numbers", "parse", "sum", "sink"):
            want = sum(
                v
                for k, v in metrics.items()
                if k.startswith(f"scraped.{operator}.") and k.endswith(".numRecordsIn")
            )
            metric = "flink_taskmanager_job_task_operator_numRecordsIn"
            expr = f'sum({metric}{{operator_name="{operator}"}})'
            assert _scraped(api, expr, want) == want == read, operator
        completed = [s for s in client.get_checkpoint_statistics() if s.status == "COMPLETED"]
        assert completed
        expr = 'flink_jobmanager_job_numberOfCompletedCheckpoints{job_name="scraped"}'
        assert _scraped(api, expr, len(completed)) == len(completed)
        assert metrics["scraped.numberOfCompletedCheckpoints"] == len(completed)
    finally:
        release.set()
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(30)
        if not client.get_job_execution_result().done():
            client.cancel()
        client.get_job_execution_result().exception(120)
