"""``sparkpoint checkpoints history <dir>``: the retained checkpoints of a directory as data.

Every complete ``chk-N/`` and ``savepoint-*/`` under the directory (found as ``checkpoints
list`` finds them) gives one row: id, trigger time, duration, sizes, inline bytes, files
and the size of every subtask's state, read from the statistics the job stored in its
``_metadata`` (measured again from the handles for a ``_metadata`` written before them,
whose times are then unknown); for a job reading Kafka, also the consumer lag per partition
when the checkpoint's epoch ended. It works while the job runs and after it ended. A snapshot
whose ``_metadata`` or statistics cannot be read is left out and reported on stderr (one
line each); the rest are still listed.
"""

from __future__ import annotations

import argparse
import datetime
import json
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.discovery import find_snapshot_dirs
from sparkpoint.checkpoint.stats import format_bytes, stats_from_metadata
from sparkpoint.cli.text import printable_tree, report
from sparkpoint.errors import SparkpointError

__all__ = [
    "History",
    "add_arguments",
    "checkpoint_history",
    "format_bytes",
    "format_history",
    "read_history",
]


@dataclass
class History:
    """The rows of ``history``, the directories still in progress and those skipped."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    in_progress: int = 0
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    """``(path, status, why)`` of each snapshot directory whose ``_metadata`` (status
    ``corrupt`` or ``unreadable``) or stored statistics (``statistics``) could not be read."""


def read_history(directory: str) -> History:
    """One JSON object per complete checkpoint or savepoint under ``directory``, oldest
    first; one that cannot be read is recorded in ``failed`` and the rest still listed."""
    history = History()
    for entry in find_snapshot_dirs(directory):
        if entry.failed:
            history.failed.append((entry.path, entry.status, str(entry.error)))
            continue
        if entry.metadata is None:
            history.in_progress += 1
            continue
        try:
            row = stats_from_metadata(entry.metadata, entry.path).to_json()
            lag = _consumer_lag(entry.metadata)
        except (SparkpointError, ValueError) as exc:
            history.failed.append((entry.path, "statistics", str(exc)))
            continue
        del row["status"], row["failure"]
        row["path"] = entry.path
        row["metadata_size"] = entry.metadata_size
        if lag:
            row["consumer_lag"] = lag
        history.rows.append(row)
    return history


def checkpoint_history(directory: str) -> tuple[list[dict[str, Any]], int]:
    """``read_history``'s rows and how many snapshot directories were left out (in
    progress, or unreadable)."""
    history = read_history(directory)
    return history.rows, history.in_progress + len(history.failed)


def _consumer_lag(metadata: Any) -> dict[str, dict[str, int]]:
    """Source -> partition -> records not yet read when the checkpoint's epoch ended, from
    the job master state (``sparkpoint.job``; empty when no source reports a lag)."""
    state = metadata.get_master_state("sparkpoint.job")
    data = state.to_json() if state is not None else None
    lag = data.get("source_lag") if isinstance(data, dict) else None
    if not isinstance(lag, dict):
        return {}
    # From the snapshot: only well-formed entries are shown.
    return {
        str(source): {str(split): n for split, n in by_split.items() if type(n) is int}
        for source, by_split in lag.items()
        if isinstance(by_split, dict)
    }


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


def format_history(rows: list[dict[str, Any]], skipped: int, failed: int = 0) -> str:
    """The table ``history`` prints (times in UTC; strings from the snapshots escaped):
    ``skipped`` directories have no ``_metadata`` yet, ``failed`` ones could not be read."""
    rows = printable_tree(rows)
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
        summary += f"; {skipped} directory(ies) without a _metadata (in progress?)"
    if failed:
        summary += f"; {failed} skipped: _metadata not readable (see stderr)"
    return "\n".join([*lines, summary])


def _cmd_history(args: argparse.Namespace) -> int:
    history = read_history(args.directory)
    for path, status, why in history.failed:
        report(f"skipped {path} ({status}): {why}")
    if args.json:
        print(json.dumps(history.rows, indent=2, sort_keys=True))
    else:
        print(format_history(history.rows, history.in_progress, len(history.failed)))
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
