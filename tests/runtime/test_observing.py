"""Observing a running job: the dashboard in headless Chromium, Spark's job descriptions
(status tracker, status store and event log), and ``sparkpoint checkpoints history`` both
while the job runs and after it was cancelled with its checkpoints retained.

One job serves every test of this module (module fixture): a keyed count over an endless
number sequence, checkpointed every epoch, that fails once (a whole-job failover) and is
held before epoch ``PAUSE_AT`` by a driver hook, so what the page shows, what the job client
says and what storage holds can be compared exactly. Chromium is Debian's ``chromium``,
installed on first use (``tests/fixtures/system.py``); the test fails, never skips, without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.cli.history import checkpoint_history
from sparkpoint.runtime.spark.epoch import job_group
from tests.fixtures.system import chromium
from tests.runtime.jobs.reference import counted_pairs

JOB_NAME = '<script>alert("job")</script> counts'
OPERATOR_NAME = "<script>alert('op')</script>"
PAUSE_AT = 12  # the hook holds the job before this epoch's first run
FAIL_AT = 1_700  # the record whose processing fails once (epoch 4 of split 0)
SCREENSHOT_DIR = os.environ.get("SPARKPOINT_SCREENSHOT_DIR")  # also save the PNGs there
DESCRIPTION = re.compile(r"^sparkpoint (.*) epoch (\d+)(?: (checkpoint|savepoint) (\d+))?$")

pytestmark = pytest.mark.spark


@dataclass
class RunningJob:
    client: Any
    spark: Any
    checkpoint_dir: Path
    paused: threading.Event
    release: threading.Event
    failures: Any
    tmp: Path


@pytest.fixture(scope="module")
def job(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningJob]:
    from sparkpoint.common import Configuration, Encoder, RestartStrategies
    from sparkpoint.datastream import (
        CheckpointingMode,
        ExternalizedCheckpointRetention,
        FileSystemCheckpointStorage,
        StreamExecutionEnvironment,
    )
    from sparkpoint.datastream.connectors.file_system import FileSink
    from sparkpoint.testing import FailureInjector, Faults

    tmp = tmp_path_factory.mktemp("observing")
    conf = Configuration()
    conf.set_string("sparkpoint.local-state.dir", str(tmp / "local-state"))
    conf.set_string("sparkpoint.epoch.max-records-per-split", "500")
    conf.set_string("sparkpoint.dashboard.enabled", "true")
    conf.set_string("sparkpoint.dashboard.port", "0")
    # A Spark job per epoch, each described (test_every_epoch_job_is_described_in_spark);
    # long-running tasks are described per launch (tests/runtime/test_long_running.py).
    conf.set_string("sparkpoint.epoch.mode", "job")
    env = StreamExecutionEnvironment.get_execution_environment(conf, spark=spark)
    env.set_parallelism(2)
    env.enable_checkpointing(10, CheckpointingMode.EXACTLY_ONCE)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_storage(FileSystemCheckpointStorage(str(tmp / "checkpoints")))
    cc.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    cc.set_max_concurrent_checkpoints(1)
    cc.set_num_retained_checkpoints(3)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    paused, release = threading.Event(), threading.Event()

    def hold(event: Any) -> None:
        if event.epoch >= PAUSE_AT and not release.is_set():
            paused.set()
            release.wait(300)

    env.set_fault_injection(Faults().on_epoch_start(hold))
    # Four failures: Spark's four attempts of the task, then the job master fails over.
    failures = FailureInjector(str(tmp / "failures"), at_record=FAIL_AT, times=4)
    (
        counted_pairs(env, 10**9, 50, failures)
        .name(OPERATOR_NAME)
        .sink_to(FileSink.for_row_format(str(tmp / "out"), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    client = env.execute_async(JOB_NAME)
    running = RunningJob(client, spark, tmp / "checkpoints", paused, release, failures, tmp)
    try:
        assert paused.wait(240), f"the job never reached epoch {PAUSE_AT}"
        yield running
    finally:
        release.set()
        if not client.get_job_execution_result().done():
            client.cancel()
        client.get_job_execution_result().exception(120)


def browser(*args: str) -> bytes:
    cmd = [
        str(chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--disable-dev-shm-usage",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout


class _Dom(HTMLParser):
    """Ids' texts, checkpoint history rows, and every element name seen."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.text_of: dict[str, str] = {}
        self.history: list[tuple[int, str]] = []
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = dict(attrs)
        if tag == "tr" and a.get("data-checkpoint-id"):
            self.history.append((int(str(a["data-checkpoint-id"])), str(a["data-status"])))
        if tag not in ("br", "meta", "line", "rect"):
            self._open.append(a.get("id"))

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("br", "meta", "line", "rect") and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for ident in self._open:
            if ident:
                self.text_of[ident] = self.text_of.get(ident, "") + data


def completed(stats: list[Any]) -> list[Any]:
    return [s for s in stats if s.status == "COMPLETED"]


def test_dashboard_in_chromium_shows_the_checkpoint_history(job: RunningJob) -> None:
    url = job.client.get_dashboard_url()
    assert url is not None and url.startswith("http://127.0.0.1:")
    stats = job.client.get_checkpoint_statistics()
    assert job.failures.fired() == 4 and len(job.client.get_failovers()) == 1
    dom_text = browser("--dump-dom", url).decode()
    dom = _Dom()
    dom.feed(dom_text)
    # every checkpoint the job client knows, newest first, with its status
    assert dom.history == [(s.checkpoint_id, s.status) for s in reversed(stats)]
    counts = {
        key: int(dom.text_of[f"count-{key}"])
        for key in ("triggered", "in-progress", "completed", "failed", "restored")
    }
    assert counts == {
        "triggered": len(stats),
        "in-progress": sum(s.status == "IN_PROGRESS" for s in stats),
        "completed": len(completed(stats)),
        "failed": sum(s.status == "FAILED" for s in stats),
        "restored": 1,
    }
    # one per epoch at most (fewer while asynchronous uploads are pending); the failover
    # aborted the one in flight
    assert counts["completed"] >= 3 and counts["failed"] >= 1
    assert dom.text_of["failover-count"] == "1"
    assert (
        f"Latest completed: {completed(stats)[-1].checkpoint_id} "
        in (dom.text_of["latest-checkpoint"])
    )
    assert dom.text_of["job-status"] == "RUNNING"
    # names are text, never markup: no script element, the names shown as written
    assert "script" not in dom.tags
    assert dom.text_of["job-name"] == JOB_NAME
    assert OPERATOR_NAME in dom.text_of["operators"]
    assert "&lt;script&gt;alert(" in dom_text
    # the JSON gives the same figures as the job client; nothing but GET/HEAD is served
    with urllib.request.urlopen(url + "api/job", timeout=30) as answer:
        data = json.load(answer)
    assert data["checkpoints"] == [s.to_json() for s in stats]
    for method in ("POST", "PUT", "DELETE"):
        request = urllib.request.Request(url, data=b"", method=method)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 405
    # screenshots for docs/observing.md
    for name, size in (("dashboard.png", "1280,1700"), ("dashboard-top.png", "1280,900")):
        shot = job.tmp / name
        browser(f"--screenshot={shot}", f"--window-size={size}", url)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        if SCREENSHOT_DIR:
            shutil.copy(shot, Path(SCREENSHOT_DIR) / name)


def test_every_epoch_job_is_described_in_spark(job: RunningJob) -> None:
    sc = job.spark.sparkContext
    group = job_group_of(job)
    ids = sorted(sc.statusTracker().getJobIdsForGroup(group))
    store = sc._jsc.sc().statusStore()
    descriptions = []
    for job_id in ids:
        data = store.job(job_id)
        assert data.jobGroup().get() == group
        descriptions.append(str(data.description().get()))
    checkpoint_of_epoch = _described_epochs(descriptions)
    epochs_run = job.client.job_master.progress.epochs_run
    # every epoch that ran (failed runs included) has its jobs; the last held one none yet
    assert set(checkpoint_of_epoch) == set(range(1, PAUSE_AT))
    assert epochs_run == PAUSE_AT - 1 - len(job.client.get_failovers())  # one epoch failed
    for s in job.client.get_checkpoint_statistics():
        if s.status == "COMPLETED":
            assert s.checkpoint_id in checkpoint_of_epoch[s.epoch]
    # the event log (spark.eventLog.enabled in the test session) carries the same
    log_dir = sc.getConf().get("spark.eventLog.dir")
    assert sc.getConf().get("spark.eventLog.enabled") == "true" and log_dir
    logged = []
    for path in Path(log_dir.removeprefix("file:")).rglob("*"):
        if path.is_file() and sc.applicationId in str(path):
            for line in path.read_text().splitlines(keepends=True):
                if '"SparkListenerJobStart"' in line and line.endswith("\n"):
                    props = json.loads(line).get("Properties", {})
                    if props.get("spark.jobGroup.id") == group:
                        logged.append(props["spark.job.description"])
    assert logged and _described_epochs(logged) == checkpoint_of_epoch


def job_group_of(job: RunningJob) -> str:
    return job_group(job.client.get_job_id())


def _described_epochs(descriptions: list[str]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for text in descriptions:
        if text == f"sparkpoint {JOB_NAME} local state cleanup":
            continue
        match = DESCRIPTION.match(text)
        assert match, text
        assert match.group(1) == JOB_NAME
        ids = out.setdefault(int(match.group(2)), set())
        if match.group(4):
            ids.add(int(match.group(4)))
    return out


def _history_without_paths(directory: Path) -> list[dict[str, Any]]:
    rows, _skipped = checkpoint_history(str(directory))
    for row in rows:
        del row["path"], row["metadata_size"], row["external_pointer"]
    return rows


def _live(stats: list[Any], retained: int) -> list[dict[str, Any]]:
    out = []
    for s in completed(stats)[-retained:]:
        row = s.to_json()
        del row["status"], row["failure"], row["external_pointer"]
        out.append(row)
    return out


def test_history_while_running_and_after_cancel(job: RunningJob) -> None:
    url = job.client.get_dashboard_url()
    stats = job.client.get_checkpoint_statistics()
    running = _history_without_paths(job.checkpoint_dir)
    assert running == _live(stats, 3)
    assert [r["id"] for r in running] == [s.checkpoint_id for s in completed(stats)[-3:]]
    assert all(r["subtasks"] and r["state_size"] > 0 for r in running)
    assert {(s["operator_id"], s["subtask"]) for s in running[-1]["subtasks"]} == {
        ("count", 0),
        ("count", 1),
    }
    job.release.set()
    job.client.cancel()
    job.client.get_job_execution_result().exception(120)
    assert job.client.job_master.status == "CANCELED"
    assert job.client.get_dashboard_url() is None  # served while the job runs
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=10)
    after = job.client.get_checkpoint_statistics()
    retained = _history_without_paths(job.checkpoint_dir)
    assert retained == _live(after, 3) and len(retained) == min(3, len(completed(after)))
    assert completed(after)[: len(completed(stats))] == completed(stats)
