"""The dashboard's HTML page: a ``JobView`` rendered as one self-contained document.

Flink's checkpoint tab is the model: counts, the latest checkpoint, history with durations
and sizes as charts, per-subtask detail, restores and failovers. Charts are inline SVG
and styles inline CSS: the page loads nothing else and runs no script (it reloads itself
with a ``refresh`` meta tag). Every name and text that comes from the job (job, operator
and executor names, failure causes, paths) goes through ``html.escape``.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Sequence

from sparkpoint.checkpoint.stats import CheckpointStats, format_bytes
from sparkpoint.metrics.catalog import key_of
from sparkpoint.runtime.dashboard.view import JobView

__all__ = ["HISTORY_ROWS", "render_page"]

HISTORY_ROWS = 100  # the history table shows this many newest checkpoints
_CHART_BARS = 40  # the charts show this many newest checkpoints

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;
 background:#f4f6f9;color:#1d2733;font-size:14px}
header{background:#1f3a5f;color:#fff;padding:14px 24px;display:flex;align-items:baseline;gap:16px}
header h1{font-size:20px;margin:0;font-weight:600}
header .jobid{opacity:.7;font-family:monospace;font-size:12px}
main{padding:16px 24px}
section{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:12px 16px;
 margin-bottom:14px}
h2{font-size:15px;margin:0 0 10px 0;color:#1f3a5f}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #e3e8ee;border-radius:5px;padding:8px 14px;min-width:110px}
.card .label{font-size:11px;text-transform:uppercase;color:#6b7785;letter-spacing:.04em}
.card .value{font-size:20px;font-weight:600}
.status{padding:2px 10px;border-radius:10px;font-size:12px;font-weight:600;background:#888}
.status-RUNNING{background:#2e7d32}.status-RESTARTING{background:#ef6c00}
.status-FAILED,.status-FAILING{background:#c62828}.status-FINISHED{background:#1565c0}
.status-CANCELED,.status-CANCELLING{background:#6d4c41}
table{border-collapse:collapse;width:100%;font-size:13px}
th{text-align:left;color:#6b7785;font-weight:600;border-bottom:2px solid #e3e8ee;padding:4px 8px}
td{border-bottom:1px solid #eef1f4;padding:4px 8px;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.COMPLETED{color:#2e7d32}.FAILED{color:#c62828}.IN_PROGRESS{color:#6b7785}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart h3{font-size:13px;margin:0 0 4px 0;color:#3b4856}
details summary{cursor:pointer;color:#1f3a5f}
.muted{color:#6b7785}
footer{padding:0 24px 16px;color:#6b7785;font-size:12px}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _ms(ms: int) -> str:
    return "-" if ms < 0 else f"{ms:,} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _time(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%H:%M:%S")


def _job_metric(view: JobView, name: str) -> int:
    """A job-level gauge in milliseconds (-1 when the view lacks it)."""
    key = key_of(name)
    for m in view.metrics:
        if m.operator_id is None and m.key == key and isinstance(m.value, int):
            return m.value
    return -1


def _latency_cards(view: JobView) -> str:
    """The latest publication's record latency (mean; newest and oldest record) and
    commit latency (docs/observing.md, Record latency)."""
    mean = _ms(_job_metric(view, "sparkpoint.lastCommitRecordLatencyMean"))
    newest = _ms(_job_metric(view, "sparkpoint.lastCommitRecordLatencyMin"))
    oldest = _ms(_job_metric(view, "sparkpoint.lastCommitRecordLatencyMax"))
    commit = _ms(_job_metric(view, "sparkpoint.lastCommitLatency"))
    return "".join(
        (
            _card("Record latency", mean, "record-latency"),
            _card("Newest / oldest record", f"{newest} / {oldest}", "record-latency-range"),
            _card("Commit latency", commit, "commit-latency"),
        )
    )


def _card(label: str, value: str, ident: str) -> str:
    return (
        f'<div class="card"><div class="label">{_e(label)}</div>'
        f'<div class="value" id="{ident}">{_e(value)}</div></div>'
    )


def _bar_chart(
    title: str,
    ident: str,
    stats: Sequence[CheckpointStats],
    values: Sequence[int],
    overlay: Sequence[int] | None,
    unit: str,
) -> str:
    """Vertical bars, one per checkpoint (``overlay``: a darker bar inside each)."""
    width, height, left, bottom, top = 560, 190, 56, 22, 10
    plot_w, plot_h = width - left - 8, height - bottom - top
    peak = max([*values, 1])
    step = plot_w / max(len(values), 1)
    bar_w = max(2.0, step * 0.7)
    fmt = format_bytes if unit == "bytes" else (lambda v: _ms(int(v)))
    parts = [
        f'<svg id="{ident}" width="{width}" height="{height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{_e(title)}</title>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#b8c2cc"/>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 8}" y2="{top + plot_h}" '
        'stroke="#b8c2cc"/>',
        f'<text x="{left - 4}" y="{top + 8}" font-size="10" text-anchor="end" '
        f'fill="#6b7785">{_e(fmt(peak))}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" font-size="10" text-anchor="end" '
        'fill="#6b7785">0</text>',
    ]
    label_every = max(1, len(values) // 10)
    for i, (s, v) in enumerate(zip(stats, values)):
        x = left + i * step + (step - bar_w) / 2
        h = plot_h * v / peak
        color = {"COMPLETED": "#5b8fd4", "FAILED": "#d9534f"}.get(s.status, "#b0b8c1")
        tip = f"checkpoint {s.checkpoint_id} ({s.status}): {fmt(v)}"
        if overlay is not None:
            tip += f", written {fmt(overlay[i])}"
        parts.append(
            f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" '
            f'height="{h:.1f}" fill="{color}"><title>{_e(tip)}</title></rect>'
        )
        if overlay is not None:
            oh = plot_h * overlay[i] / peak
            parts.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - oh:.1f}" width="{bar_w:.1f}" '
                f'height="{oh:.1f}" fill="#1f3a5f" opacity="0.55"/>'
            )
        if i % label_every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{height - 6}" font-size="10" '
                f'text-anchor="middle" fill="#6b7785">{s.checkpoint_id}</text>'
            )
    if not values:
        parts.append(
            f'<text x="{left + 10}" y="{top + plot_h / 2}" font-size="12" '
            'fill="#6b7785">no checkpoint yet</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _subtask_bars(stats: CheckpointStats) -> str:
    """Horizontal bars: the state size of every subtask of the checkpoint."""
    subs = stats.subtasks
    if not subs:
        return '<p class="muted">This checkpoint holds no keyed state.</p>'
    peak = max([s.state_size for s in subs] + [1])
    row_h, label_w, bar_max = 20, 190, 300
    height = row_h * len(subs) + 6
    parts = [
        f'<svg id="subtask-chart" width="{label_w + bar_max + 110}" height="{height}" '
        'role="img" xmlns="http://www.w3.org/2000/svg">'
        f"<title>state size per subtask, checkpoint {stats.checkpoint_id}</title>"
    ]
    for i, s in enumerate(subs):
        y = 3 + i * row_h
        w = bar_max * s.state_size / peak
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 13}" font-size="11" text-anchor="end" '
            f'fill="#3b4856">{_e(s.operator_id)} #{s.subtask}</text>'
            f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 6}" '
            f'fill="#5b8fd4"><title>{_e(s.operator_id)} #{s.subtask}: '
            f"{_e(format_bytes(s.state_size))}</title></rect>"
            f'<text x="{label_w + w + 6:.1f}" y="{y + 13}" font-size="11" '
            f'fill="#3b4856">{_e(format_bytes(s.state_size))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _subtask_table(stats: CheckpointStats) -> str:
    rows = "".join(
        f"<tr><td>{_e(s.operator_id)}</td><td class=num>{s.subtask}</td>"
        f"<td class=num>{_e(format_bytes(s.state_size))}</td>"
        f"<td class=num>{_e(format_bytes(s.checkpointed_size))}</td>"
        f"<td class=num>{_e(format_bytes(s.inline_bytes))}</td>"
        f"<td class=num>{s.files_written}</td></tr>"
        for s in stats.subtasks
    )
    return (
        "<table class=subtasks><tr><th>Operator</th><th class=num>Subtask</th>"
        "<th class=num>State</th><th class=num>Written</th><th class=num>Inline</th>"
        f"<th class=num>Files</th></tr>{rows}</table>"
    )


def _history(view: JobView) -> str:
    shown = list(reversed(view.checkpoints))[:HISTORY_ROWS]
    rows = []
    for s in shown:
        detail = ""
        if s.subtasks:
            detail = (
                f"<details><summary>{len(s.subtasks)} subtasks</summary>"
                f"{_subtask_table(s)}</details>"
            )
        elif s.failure:
            detail = f'<span class="FAILED">{_e(s.failure)}</span>'
        rows.append(
            f'<tr data-checkpoint-id="{s.checkpoint_id}" data-status="{_e(s.status)}">'
            f"<td class=num>{s.checkpoint_id}</td>"
            f'<td class="{_e(s.status)}">{_e(s.status)}</td>'
            f"<td>{'savepoint' if s.is_savepoint else 'checkpoint'}</td>"
            f"<td class=num>{s.epoch}</td><td>{_e(_time(s.trigger_timestamp_ms))}</td>"
            f"<td class=num>{_e(_ms(s.duration_ms))}</td>"
            f"<td class=num>{_e(format_bytes(s.state_size))}</td>"
            f"<td class=num>{_e(format_bytes(s.checkpointed_size))}</td>"
            f"<td class=num>{_e(format_bytes(s.inline_bytes))}</td>"
            f"<td class=num>{s.files_written}</td><td>{detail}</td></tr>"
        )
    more = ""
    if len(view.checkpoints) > HISTORY_ROWS:
        more = (
            f'<p class="muted">The newest {HISTORY_ROWS} of {len(view.checkpoints)} '
            "checkpoints; all of them: /api/job</p>"
        )
    return (
        '<table id="checkpoint-history"><tr><th class=num>ID</th><th>Status</th><th>Type</th>'
        "<th class=num>Epoch</th><th>Triggered (UTC)</th><th class=num>Duration</th>"
        "<th class=num>State</th><th class=num>Written</th><th class=num>Inline</th>"
        f"<th class=num>Files</th><th>Subtasks</th></tr>{''.join(rows)}</table>{more}"
    )


def _recovery(view: JobView) -> str:
    failovers = "".join(
        f"<tr><td class=num>{f.epoch}</td><td class=num>{f.incarnation}</td>"
        f"<td>{'checkpoint ' + str(f.checkpoint_id) if f.checkpoint_id else 'the start'}</td>"
        f"<td>{_e(f.cause)}</td></tr>"
        for f in view.failovers
    )
    restores = "".join(
        f"<tr><td class=num>{r.epoch}</td><td>{_e(r.operator_id)}</td>"
        f"<td class=num>{r.subtask}</td><td>{_e(r.executor_id)}</td>"
        f"<td class=num>{r.changelog_entries}</td><td class=num>{r.seconds:.2f} s</td>"
        f"<td>{_e(r.cause)}</td></tr>"
        for r in view.subtask_restores
    )
    return (
        "<h2>Restores and failovers</h2>"
        f'<p>Whole-job failovers: <b id="failover-count">{len(view.failovers)}</b>; '
        f'subtasks restored alone: <b id="restore-count">{len(view.subtask_restores)}</b></p>'
        '<table id="failovers"><tr><th class=num>Failed epoch</th><th class=num>Incarnation'
        "</th><th>Restored from</th><th>Cause</th></tr>"
        f"{failovers or '<tr><td colspan=4 class=muted>none</td></tr>'}</table><br>"
        '<table id="subtask-restores"><tr><th class=num>Epoch</th><th>Operator</th>'
        "<th class=num>Subtask</th><th>Executor</th><th class=num>Changelog epochs</th>"
        "<th class=num>Took</th><th>Cause</th></tr>"
        f"{restores or '<tr><td colspan=7 class=muted>none</td></tr>'}</table>"
    )


def _operators(view: JobView) -> str:
    if not view.operators:
        return '<p class="muted">No keyed operators.</p>'
    rows = "".join(
        f"<tr><td>{_e(o.operator_id)}</td><td>{_e(o.name)}</td>"
        f"<td class=num>{o.parallelism}</td>"
        f"<td>{', '.join(f'#{i}: {_e(ex)}' for i, ex in enumerate(o.executors))}</td></tr>"
        for o in view.operators
    )
    return (
        '<table id="operators"><tr><th>Operator</th><th>Name</th><th class=num>'
        f"Parallelism</th><th>Executor of each subtask</th></tr>{rows}</table>"
    )


def _metric(value: object) -> str:
    if isinstance(value, dict):  # a distribution
        return ", ".join(f"{k} {_metric(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:,.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _metrics(view: JobView) -> str:
    if not view.metrics:
        return '<p class="muted">No metrics yet.</p>'
    rows = "".join(
        f"<tr><td>{_e(m.identifier)}</td><td>{_e(m.kind.value)}</td>"
        f"<td class=num>{_e(_metric(m.value))}</td></tr>"
        for m in view.metrics
        if m.value is not None
    )
    return (
        '<table id="metrics-table"><tr><th>Metric</th><th>Kind</th><th class=num>Value</th>'
        f"</tr>{rows}</table>"
    )


def _lag(view: JobView) -> str:
    """The consumer lag table: one row per source split that reports one (Kafka)."""
    rows = "".join(
        f"<tr><td>{_e(op)}</td><td>{_e(split)}</td><td class=num>{lag:,}</td></tr>"
        for op, by_split in view.consumer_lag.items()
        for split, lag in by_split.items()
    )
    if not rows:
        return '<p class="muted">No source reports a consumer lag.</p>'
    return (
        '<table id="consumer-lag"><tr><th>Source</th><th>Partition</th>'
        f"<th class=num>Lag (records)</th></tr>{rows}</table>"
    )


def render_page(view: JobView) -> str:
    """The whole page for ``view``."""
    counts = view.counts()
    done = [s for s in view.checkpoints if s.status == "COMPLETED"]
    latest = done[-1] if done else None
    recent = list(view.checkpoints)[-_CHART_BARS:]
    finished = [s for s in recent if s.status != "IN_PROGRESS"]
    latest_html = '<p class="muted">No completed checkpoint yet.</p>'
    subtasks_html = latest_html
    if latest is not None:
        latest_html = (
            f'<p id="latest-checkpoint">Latest completed: <b>{latest.checkpoint_id}</b> '
            f"(epoch {latest.epoch}) at {_e(_time(latest.trigger_timestamp_ms))} UTC, "
            f"{_e(_ms(latest.duration_ms))}, {_e(format_bytes(latest.state_size))} state, "
            f"{_e(format_bytes(latest.inline_bytes))} inline, {latest.files_written} files"
            f"<br><span class=muted>{_e(latest.external_pointer or '')}</span></p>"
        )
        subtasks_html = (
            f"<h2>Subtasks of checkpoint {latest.checkpoint_id}</h2>"
            f"{_subtask_bars(latest)}{_subtask_table(latest)}"
        )
    interval = f"every {_ms(view.interval_ms)}" if view.checkpointing else "off"
    count_cards = "".join(
        _card(label, str(counts[key]), f"count-{key.replace('_', '-')}")
        for key, label in (
            ("triggered", "Triggered"),
            ("in_progress", "In progress"),
            ("completed", "Completed"),
            ("failed", "Failed"),
            ("restored", "Restored"),
        )
    )
    overview = "".join(
        (
            _card("Uptime", f"{view.uptime_s:.0f} s", "uptime"),
            _card("Epochs", f"{view.epochs:,}", "epochs"),
            _card("Epoch rate", f"{view.epochs_per_s:.2f}/s", "epoch-rate"),
            _card("Records in", f"{view.records_in:,}", "records-in"),
            _card("Records/s", f"{view.records_per_s:,.0f}", "records-rate"),
            _card("Restarts", str(view.restarts), "restarts"),
            _card("Checkpoints", interval, "checkpoint-interval"),
            _latency_cards(view),
        )
    )
    refresh = max(1, round(view.refresh_ms / 1000))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh}">
<title>sparkpoint: {_e(view.job_name)}</title><style>{_CSS}</style></head>
<body>
<header><h1 id="job-name">{_e(view.job_name)}</h1>
<span class="status status-{_e(view.status)}" id="job-status">{_e(view.status)}</span>
<span class="jobid">job {_e(view.job_id)}</span></header>
<main>
<section id="overview"><h2>Job</h2><div class="cards">{overview}</div></section>
<section id="checkpoint-counts"><h2>Checkpoints</h2><div class="cards">{count_cards}</div>
{latest_html}</section>
<section id="charts"><h2>History</h2><div class="charts">
<div class="chart"><h3>Duration per checkpoint</h3>
{
        _bar_chart(
            "duration per checkpoint",
            "duration-chart",
            finished,
            [max(0, s.duration_ms) for s in finished],
            None,
            "ms",
        )
    }</div>
<div class="chart"><h3>State size per checkpoint (dark: written for it)</h3>
{
        _bar_chart(
            "state size per checkpoint",
            "size-chart",
            finished,
            [s.state_size for s in finished],
            [s.checkpointed_size for s in finished],
            "bytes",
        )
    }</div>
</div></section>
<section id="subtasks">{subtasks_html}</section>
<section id="history"><h2>Checkpoint history</h2>{_history(view)}</section>
<section id="recovery">{_recovery(view)}</section>
<section id="placement"><h2>Keyed operators</h2>{_operators(view)}</section>
<section id="metrics"><h2>Metrics</h2>{_metrics(view)}</section>
<section id="lag"><h2>Consumer lag</h2>{_lag(view)}</section>
</main>
<footer>sparkpoint dashboard: read-only; reloads every {refresh} s; JSON at
<a href="/api/job">/api/job</a>, Prometheus text at <code>/metrics</code>.</footer>
</body></html>
"""
