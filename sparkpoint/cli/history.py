"""``sparkpoint checkpoints history <dir>``: the retained checkpoints of a directory as data.

Every complete ``chk-N/`` and ``savepoint-*/`` under the directory (found as ``checkpoints
list`` finds them) gives one row: id, trigger time, duration, sizes, inline bytes, files
and the size of every subtask's state, read from the statistics the job stored in its
``_metadata`` (measured again from the handles for a ``_metadata`` written before them,
whose times are then unknown); for a job reading Kafka, also the consumer lag per partition
when the checkpoint's epoch ended. It works while the job runs and after it ended.
"""

from __future__ import annotations

import argparse
import datetime
import json
from typing import Any

from sparkpoint.checkpoint.discovery import find_snapshot_dirs, load_pointer
from sparkpoint.checkpoint.stats import CheckpointStats, format_bytes, stats_from_metadata

__all__ = ["add_arguments", "checkpoint_history", "format_bytes", "format_history"]


def checkpoint_history(directory: str) -> tuple[list[dict[str, Any]], int]:
    """One JSON object per complete checkpoint or savepoint under ``directory``, oldest
    first, and how many snapshot directories were skipped (in progress, or corrupt)."""
    rows: list[dict[str, Any]] = []
    skipped = 0
    for entry in find_snapshot_dirs(directory):
        if not entry.complete:
            skipped += 1
            continue
        metadata, location = load_pointer(entry.path)
        stats: CheckpointStats = stats_from_metadata(metadata, location.external_pointer)
        row = stats.to_json()
        del row["status"], row["failure"]
        row["path"] = entry.path
        row["metadata_size"] = entry.metadata_size
        lag = _consumer_lag(metadata)
        if lag:
            row["consumer_lag"] = lag
        rows.append(row)
    return rows, skipped


def _consumer_lag(metadata: Any) -> dict[str, dict[str, int]]:
    """Source -> partition -> records not yet read when the checkpoint's epoch ended, from
    the job master state (``sparkpoint.job``; empty when no source reports a lag)."""
    state = metadata.get_master_state("sparkpoint.job")
    data = state.to_json() if state is not None else None
    lag = data.get("source_lag") if isinstance(data, dict) else None
    return lag if isinstance(lag, dict) else {}


def _total_lag(row: dict[str, Any]) -> str:
    lag = row.get("consumer_lag")
    return "-" if not lag else str(sum(n for by in lag.values() for n in by.values()))


def _time(ms: int) -> str:
    if ms < 0:
        return "-"
    stamp = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _subtasks(row: dict[str, Any]) -> str:
    by_op: dict[str, list[str]] = {}
    for sub in row["subtasks"]:
        by_op.setdefault(sub["operator_id"], []).append(format_bytes(sub["state_size"]))
    return "; ".join(f"{op}: {' / '.join(sizes)}" for op, sizes in by_op.items()) or "-"


def format_history(rows: list[dict[str, Any]], skipped: int) -> str:
    """The table ``history`` prints (times in UTC)."""
    header: tuple[str, ...] = (
        "ID",
        "KIND",
        "EPOCH",
        "TRIGGERED (UTC)",
        "DURATION",
        "STATE",
        "WRITTEN",
        "INLINE",
        "FILES",
        "PER SUBTASK",
    )
    with_lag = any("consumer_lag" in r for r in rows)
    if with_lag:
        header = (*header[:-1], "LAG", header[-1])
    table = [header] + [
        (
            str(r["id"]),
            "savepoint" if r["savepoint"] else "checkpoint",
            str(r["epoch"]) if r["epoch"] else "-",
            _time(r["trigger_timestamp_ms"]),
            "-" if r["duration_ms"] < 0 else f"{r['duration_ms']} ms",
            format_bytes(r["state_size"]),
            format_bytes(r["checkpointed_size"]),
            format_bytes(r["inline_bytes"]),
            str(r["files"]),
            *((_total_lag(r),) if with_lag else ()),
            _subtasks(r),
        )
        for r in rows
    ]
    widths = [max(len(t[i]) for t in table) for i in range(len(header) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(t, widths)) + "  " + t[-1] for t in table]
    summary = f"{len(rows)} retained checkpoint(s)"
    if skipped:
        summary += f"; {skipped} directory(ies) without a readable _metadata (in progress?)"
    return "\n".join([*lines, summary])


def _cmd_history(args: argparse.Namespace) -> int:
    rows, skipped = checkpoint_history(args.directory)
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
    else:
        print(format_history(rows, skipped))
    return 0


def add_arguments(actions: Any) -> None:
    """Register ``history`` on the ``checkpoints`` subparsers."""
    p = actions.add_parser(
        "history",
        help="per retained checkpoint: trigger time, duration, sizes, files, per subtask",
    )
    p.add_argument("directory", help="checkpoint base directory, job directory or URI")
    p.add_argument(
        "--json", action="store_true", help="print a JSON list, one object per retained checkpoint"
    )
    p.set_defaults(handler=_cmd_history)
