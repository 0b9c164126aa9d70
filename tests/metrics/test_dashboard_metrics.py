"""The dashboard's metrics section and ``/api/job``'s ``metrics``: names stay text."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser

from sparkpoint.metrics.sample import MetricKey, MetricKind, MetricValue
from sparkpoint.runtime.dashboard.page import render_page
from sparkpoint.runtime.dashboard.view import JobView

EVIL = "<script>alert(1)</script>"


class _Texts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _view(metrics: tuple[MetricValue, ...], **fields: object) -> JobView:
    """A running job's view with ``metrics`` (``fields`` override the rest)."""
    base: dict[str, object] = {
        "job_name": "job",
        "job_id": "id",
        "status": "RUNNING",
        "uptime_s": 1.0,
        "epochs": 1,
        "records_in": 1,
        "restarts": 0,
        "epochs_per_s": 0.0,
        "records_per_s": 0.0,
        "checkpoints": (),
        "epoch_reports": (),
        "failovers": (),
        "operators": (),
        "checkpointing": False,
        "interval_ms": -1,
    }
    return JobView(metrics=metrics, **{**base, **fields})  # type: ignore[arg-type]


def test_metrics_section_shows_every_metric_as_text() -> None:
    metrics = (
        MetricValue(
            "id", EVIL, "op", EVIL, 0, MetricKey(((EVIL, None),), "c"), MetricKind.COUNTER, 1234
        ),
        MetricValue("id", EVIL, None, None, None, MetricKey((), "uptime"), MetricKind.GAUGE, 5),
        MetricValue(
            "id",
            EVIL,
            "op",
            EVIL,
            1,
            MetricKey((), "m"),
            MetricKind.METER,
            {"count": 3, "rate": 0.5},
        ),
        MetricValue("id", EVIL, "op", EVIL, 1, MetricKey((), "w"), MetricKind.GAUGE, None),
    )
    view = _view(metrics, job_name=EVIL)
    parsed = _Texts()
    parsed.feed(render_page(view))
    assert "script" not in parsed.tags
    text = "".join(parsed.text)
    assert f"{EVIL}.{EVIL}.0.{EVIL}.c" in text and "1,234" in text
    assert f"{EVIL}.uptime" in text
    assert "count 3, rate 0.500" in text
    assert f"{EVIL}.{EVIL}.1.w" not in text  # no value yet: not listed
    as_json = view.to_json()["metrics"]
    assert as_json[f"{EVIL}.{EVIL}.0.{EVIL}.c"] == 1234
    assert as_json[f"{EVIL}.{EVIL}.1.m"] == {"count": 3, "rate": 0.5}
    empty = render_page(dataclasses.replace(view, metrics=()))
    assert "No metrics yet." in empty


def test_job_section_shows_the_latest_publication_latency() -> None:
    def gauge(name: str, value: int) -> MetricValue:
        key = MetricKey((("sparkpoint", None),), name)
        return MetricValue("id", "job", None, None, None, key, MetricKind.GAUGE, value)

    view = _view(
        (
            gauge("lastCommitRecordLatencyMax", 12_500),
            gauge("lastCommitRecordLatencyMean", 830),
            gauge("lastCommitRecordLatencyMin", 120),
            gauge("lastCommitLatency", 640),
        ),
        checkpointing=True,
        interval_ms=1000,
    )
    page = render_page(view)
    assert '<div class="value" id="record-latency">830 ms</div>' in page
    assert '<div class="value" id="record-latency-range">120 ms / 12.5 s</div>' in page
    assert '<div class="value" id="commit-latency">640 ms</div>' in page
    before = render_page(dataclasses.replace(view, metrics=(gauge("lastCommitLatency", -1),)))
    assert '<div class="value" id="record-latency">-</div>' in before
    assert '<div class="value" id="record-latency-range">- / -</div>' in before
    assert '<div class="value" id="commit-latency">-</div>' in before
