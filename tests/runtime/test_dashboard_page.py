"""The dashboard page rendered from a ``JobView`` (no Spark, no browser): every name is
text, the history is capped, and the page references nothing outside itself."""

from __future__ import annotations

import re
import socket
import time
from html.parser import HTMLParser

import pytest

from sparkpoint.checkpoint.stats import CheckpointStats, SubtaskStats
from sparkpoint.errors import SparkpointError
from sparkpoint.runtime.dashboard.page import HISTORY_ROWS, render_page
from sparkpoint.runtime.dashboard.view import JobView, OperatorView, RateMeter
from sparkpoint.runtime.driver.reports import FailoverEvent, SubtaskRestoreEvent
from sparkpoint.runtime.driver.settings import ServerSettings
from sparkpoint.runtime.rest.job_server import JobServer
from tests.runtime.fake_job import FakeJob

EVIL = "<script>alert(1)</script>"
ATTR = '" onmouseover="x'


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def view(n_checkpoints: int) -> JobView:
    stats = []
    for i in range(1, n_checkpoints + 1):
        s = CheckpointStats(i, False, 1_700_000_000_000 + i, "COMPLETED", 10 * i, epoch=i)
        s.subtasks = [
            SubtaskStats(EVIL, 0, 100 * i, 100 * i, 100 * i, 0),
            SubtaskStats(EVIL, 1, 30_000, 30_000, 0, 1),
        ]
        s.state_size = s.checkpointed_size = 100 * i + 30_000
        s.external_pointer = f"/ckpt/{EVIL}/chk-{i}"
        stats.append(s)
    stats.append(
        CheckpointStats(
            n_checkpoints + 1, False, 0, "FAILED", 5, failure=f"IO_EXCEPTION: {EVIL}{ATTR}"
        )
    )
    return JobView(
        job_name=EVIL + ATTR,
        job_id="abc",
        status="RUNNING",
        uptime_s=12.0,
        epochs=40,
        records_in=1000,
        restarts=1,
        epochs_per_s=2.5,
        records_per_s=100.0,
        checkpoints=tuple(stats),
        epoch_reports=(),
        failovers=(FailoverEvent(3, 1, 2, f"ValueError: {EVIL}"),),
        operators=(OperatorView(EVIL, EVIL, 2, (EVIL, "1")),),
        checkpointing=True,
        interval_ms=500,
        subtask_restores=(SubtaskRestoreEvent(5, EVIL, 1, EVIL, EVIL, 2, 0.25),),
    )


def test_names_stay_text_and_nothing_is_loaded_from_elsewhere() -> None:
    page = render_page(view(3))
    parsed = _Tags()
    parsed.feed(page)
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert all(name != "onmouseover" for name, _ in parsed.attrs)
    text = "".join(parsed.text)
    assert text.count(EVIL) >= 10  # job, operators, subtasks, causes, pointer: shown as text
    assert EVIL + ATTR in text
    # no script, no external resource: only the page's own /api/job link
    assert not re.search(r"(src|href)=\"(?!/api/job)", page)
    assert "http://www.w3.org/2000/svg" in page and "<svg" in page


def test_history_is_capped_and_counted() -> None:
    v = view(HISTORY_ROWS + 20)
    page = render_page(v)
    assert page.count("data-checkpoint-id=") == HISTORY_ROWS
    assert f"The newest {HISTORY_ROWS} of {HISTORY_ROWS + 21} checkpoints" in page
    assert v.counts() == {
        "triggered": HISTORY_ROWS + 21,
        "in_progress": 0,
        "completed": HISTORY_ROWS + 20,
        "failed": 1,
        "restored": 2,
    }
    assert v.to_json()["counts"] == v.counts()


def test_rate_meter_measures_the_recent_window() -> None:
    meter = RateMeter()
    meter.sample(0, 0)
    epochs, records = meter.rates(0, 0)
    assert (epochs, records) == (0.0, 0.0)
    time.sleep(0.05)
    epochs, records = meter.rates(5, 500)
    assert 5 / 0.5 < epochs < 5 / 0.04 and abs(records / epochs - 100) < 1e-6


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SparkpointError, match=rf"127\.0\.0\.1:{port} \(sparkpoint\.dash"):
            settings = ServerSettings("127.0.0.1", port, dashboard=True)
            JobServer(FakeJob(settings), settings)
