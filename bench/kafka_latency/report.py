"""The benchmark's table in Markdown, from the JSON lines of a run (``python -m
bench.kafka_latency --markdown run.jsonl``): what docs/benchmarks.md shows, made from the
figures rather than copied by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

HEADER = (
    "| engine | guarantee | max: records/s (backlog of N in s; CPU s per M) "
    "| sustained {rate}/s: latency p50 / p99 (CPU s per M) "
    "| near_max: offered/s → latency p50 / p99 (CPU s per M) |\n|---|---|---|---|---|"
)


def _seconds(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms / 1000:.2f} s"


def _paced(row: dict[str, Any] | None) -> str:
    """A paced phase's cell: latency if every record came out in time, else what did."""
    if row is None:
        return "not run"
    if "error" in row:
        return row["error"]
    lat = f"{_seconds(row['latency_ms_p50'])} / {_seconds(row['latency_ms_p99'])}"
    cpu = f"({row['cpu_s_per_M']:,.0f}"
    if "gauge_latency_ms_mean" in row:  # the job's own gauge against the measured mean
        cpu += (
            f"; the job's gauge: mean {_seconds(row['gauge_latency_ms_mean'])}, measured "
            f"{_seconds(row['latency_ms_mean'])}"
        )
    cpu += ")"
    if row["sustained"]:
        return f"{lat} {cpu}"
    return (
        f"**not sustained**: {row['received']:,} of {row['sent']:,} out "
        f"(latency of those {lat}) {cpu}"
    )


def _max(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not run"
    if "error" in row:
        return f"not measured: {row['error']}"
    drained = "" if row["out"] == row["records"] else f", {row['out']:,} out"
    writer = "; writer-bound" if row.get("writer_bound") else ""
    return (
        f"{row['records_per_s']:,} ({row['records']:,} in {row['seconds']} s{drained}; "
        f"{row['cpu_s_per_M']:,.0f}{writer})"
    )


def table(records: Iterable[dict[str, Any]]) -> str:
    """The Markdown table (header and one row per engine) of a run's JSON records."""
    engines: dict[str, dict[str, Any]] = {}
    rate = None
    start = None
    for rec in records:
        if rec.get("run") == "start":
            start = rec
        if "engine" not in rec or "phase" not in rec:
            continue
        # One row per engine and broker protocol (``--protocols``; PLAINTEXT untagged).
        e = engines.setdefault(f"{rec['engine']} {rec.get('protocol', '')}", {})
        e[rec["phase"]] = rec
        if rec["phase"] == "sustained":
            rate = rec["rate"]
    lines = [HEADER.replace("{rate}", f"{rate:,}" if rate else "?")]
    if start is not None:
        command = " ".join(["python -m bench.kafka_latency", *start.get("argv", [])])
        lines[:0] = [f"Run of {start.get('date')} ({start.get('commit')}): `{command}`", ""]
    for phases in engines.values():
        first = next(iter(phases.values()))
        label, guarantee = first.get("label", first["engine"]), first.get("guarantee", "?")
        if "protocol" in first:
            label = f"{label} over {first['protocol']}"
        warm = phases.get("warmup", {})
        if "error" in warm:
            cells = [f"not measured: {warm['error']}", "", ""]
        else:
            near = phases.get("near_max")
            near_cell = "not run" if near is None else f"{near['rate']:,}/s → {_paced(near)}"
            cells = [_max(phases.get("max")), _paced(phases.get("sustained")), near_cell]
        lines.append("| " + " | ".join([label, guarantee, *cells]) + " |")
    return "\n".join(lines)


def read_json_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The JSON objects among ``lines`` (other lines, such as logs, are skipped)."""
    out = []
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out
