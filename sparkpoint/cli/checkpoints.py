"""``sparkpoint checkpoints list|latest|inspect``: what a checkpoint directory holds.

The directories are found by ``checkpoint.discovery`` (its docstring says where it looks);
this module describes their ``_metadata`` and prints it. ``list`` and ``latest`` answer from
the snapshots that can be read and report each one that cannot on stderr (one line each);
text output escapes what the snapshot says (``cli.text``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from sparkpoint.checkpoint.discovery import SnapshotDir, find_snapshot_dirs, latest_of, load_pointer
from sparkpoint.checkpoint.handles import (
    ByteStreamStateHandle,
    ChangelogStateBackendHandle,
    FileStateHandle,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    StateObject,
    StreamStateHandle,
)
from sparkpoint.checkpoint.integrity import integrity_summary
from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState
from sparkpoint.checkpoint.storage import (
    METADATA_FILE_NAME,
    CompletedCheckpointStorageLocation,
    read_metadata_bytes,
)
from sparkpoint.checkpoint.trust import default_trust
from sparkpoint.cli.exit_codes import EXIT_NOT_FOUND
from sparkpoint.cli.text import printable, printable_tree, report

__all__ = ["add_arguments", "describe_metadata", "format_description", "report_failed"]

_MAX_JSON_DEPTH = 64
"""Master states nested deeper than this are shown as bytes (printing them would recurse)."""


# ---- describing metadata ---------------------------------------------------------------------


def _stream_json(handle: StreamStateHandle | None) -> dict[str, Any] | None:
    if handle is None:
        return None
    out: dict[str, Any] = {"type": type(handle).__name__, "size": handle.state_size}
    if isinstance(handle, ByteStreamStateHandle):
        out["storage"] = "inline"
    elif isinstance(handle, FileStateHandle):
        out["storage"] = "file"
        out["path"] = handle.path
    else:
        out["storage"] = "placeholder"
    return out


def _handle_json(handle: StateObject) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(handle).__name__, "size": handle.state_size}
    if isinstance(handle, KeyGroupsStateHandle):
        rng = handle.key_group_range
        out["key_groups"] = [rng.start_key_group, rng.end_key_group]
        out["non_empty_key_groups"] = sum(
            1 for _, offset in handle.group_range_offsets.items() if offset >= 0
        )
        out["delegate"] = _stream_json(handle.delegate)
    elif isinstance(handle, IncrementalRemoteKeyedStateHandle):
        rng = handle.key_group_range
        out["key_groups"] = [rng.start_key_group, rng.end_key_group]
        out["backend"] = handle.backend_identifier
        out["checkpoint_id"] = handle.checkpoint_id
        out["shared"] = [
            {"local_path": h.local_path, **(_stream_json(h.handle) or {})}
            for h in handle.shared_state
        ]
        out["private"] = [
            {"local_path": h.local_path, **(_stream_json(h.handle) or {})}
            for h in handle.private_state
        ]
        out["meta"] = _stream_json(handle.meta_state_handle)
    elif isinstance(handle, ChangelogStateBackendHandle):
        rng = handle.key_group_range
        out["key_groups"] = [rng.start_key_group, rng.end_key_group]
        out["backend"] = handle.backend_identifier
        out["checkpoint_id"] = handle.checkpoint_id
        out["materialization_id"] = handle.materialization_id
        out["materialized"] = [_handle_json(h) for h in handle.materialized]
        out["changelog"] = [_stream_json(h) for h in handle.changelog]
        out["new_entries"] = handle.new_entries
    elif isinstance(handle, OperatorStateHandle):
        out["states"] = {
            name: {"mode": info.distribution_mode.name, "partitions": len(info.offsets)}
            for name, info in sorted(handle.state_name_to_partition_offsets.items())
        }
        out["delegate"] = _stream_json(handle.delegate)
    elif isinstance(handle, StreamStateHandle):
        out.update(_stream_json(handle) or {})
    return out


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in a JSON value (iteratively: no recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _master_json(state: MasterState) -> dict[str, Any]:
    out: dict[str, Any] = {"name": state.name, "version": state.version, "size": len(state.data)}
    try:
        value = state.to_json()
    except (UnicodeDecodeError, ValueError, RecursionError):
        value = None
    else:
        if _depth(value) <= _MAX_JSON_DEPTH:
            out["value"] = value
            return out
    out["value"] = None
    out["hex"] = state.data[:64].hex()
    return out


def _storage_totals(handles: list[dict[str, Any]]) -> tuple[int, int]:
    """Inline bytes and file count over handle descriptions (nested parts included)."""
    inline = files = 0
    stack: list[Any] = list(handles)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("storage") == "inline":
                inline += int(item["size"])
            elif item.get("storage") == "file":
                files += 1
            stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(item)
    return inline, files


def describe_metadata(
    metadata: CheckpointMetadata, location: CompletedCheckpointStorageLocation
) -> dict[str, Any]:
    """A JSON-able description of a checkpoint: properties, operators, handles, masters."""
    props = metadata.properties
    operators: list[dict[str, Any]] = []
    for op in metadata.operator_states:
        subtasks: list[dict[str, Any]] = []
        for index, sub in op.subtask_states.items():
            keyed = [_handle_json(h) for h in (*sub.managed_keyed_state, *sub.raw_keyed_state)]
            non_keyed = [
                _handle_json(h) for h in (*sub.managed_operator_state, *sub.raw_operator_state)
            ]
            subtasks.append(
                {"subtask": index, "finished": sub.finished, "keyed": keyed, "operator": non_keyed}
            )
        operators.append(
            {
                "operator_id": op.operator_id,
                "parallelism": op.parallelism,
                "max_parallelism": op.max_parallelism,
                "state_size": op.state_size,
                "coordinator_state": _stream_json(op.coordinator_state),
                "subtasks": subtasks,
            }
        )
    inline, files = _storage_totals(operators)
    meta_handle = location.metadata_handle
    return {
        "checkpoint_id": metadata.checkpoint_id,
        "pointer": location.external_pointer,
        "metadata_file": meta_handle.path if isinstance(meta_handle, FileStateHandle) else None,
        "metadata_size": meta_handle.state_size,
        "properties": None
        if props is None
        else {
            "type": props.checkpoint_type.name,
            "savepoint": props.is_savepoint,
            "discard_subsumed": props.discard_subsumed,
            "discard_finished": props.discard_finished,
            "discard_cancelled": props.discard_cancelled,
            "discard_failed": props.discard_failed,
            "discard_suspended": props.discard_suspended,
        },
        "state_size": metadata.state_size,
        "inline_bytes": inline,
        "state_files": files,
        "operators": operators,
        "master_states": [_master_json(m) for m in metadata.master_states],
    }


def _fmt_handle(h: dict[str, Any]) -> str:
    parts = [h["type"]]
    if "key_groups" in h:
        parts.append(f"key groups {h['key_groups'][0]}-{h['key_groups'][1]}")
    parts.append(f"{h['size']} bytes")
    delegate = h.get("delegate") or (h if "storage" in h else None)
    if delegate is not None:
        where = delegate["storage"]
        parts.append(f"{where} {delegate['path']}" if where == "file" else where)
    if "shared" in h:
        parts.append(f"{len(h['shared'])} shared + {len(h['private'])} private files")
    if "changelog" in h:
        parts.append(
            f"materialized by checkpoint {h['materialization_id']} + "
            f"{len(h['changelog'])} changelog entries ({h['new_entries']} new)"
        )
    if "states" in h:
        parts.append("states " + ", ".join(f"{n} ({v['mode']})" for n, v in h["states"].items()))
    return ", ".join(parts)


def _fmt_integrity(i: dict[str, Any]) -> str:
    signature = {
        "verified": "signed, signature verified",
        "not verified": "signed (not verified: no signing key given)",
        "none": "unsigned",
    }[i["signature"]]
    files = f"{i['state_files_with_digest']} state files with a digest"
    if i["state_files_without_digest"]:
        files += (
            f", {i['state_files_without_digest']} without (written before digests: read unchecked)"
        )
    return f"{signature}; {files}"


def format_description(described: dict[str, Any]) -> str:
    """The human-readable summary printed by ``checkpoints inspect`` (every string from the
    snapshot escaped by ``printable``; master state values are printed as ASCII JSON)."""
    masters = described["master_states"]
    d = printable_tree({k: v for k, v in described.items() if k != "master_states"})
    props = d["properties"]
    lines = [
        f"Checkpoint {d['checkpoint_id']}" + (f" ({props['type']})" if props else ""),
        f"  pointer:    {d['pointer']}",
        f"  _metadata:  {d['metadata_file'] or '(in memory)'} ({d['metadata_size']} bytes)",
    ]
    if props:
        flags = [
            k.removeprefix("discard_") for k, v in props.items() if k.startswith("discard_") and v
        ]
        lines.append(f"  discarded when: {', '.join(flags) if flags else 'never (kept)'}")
    lines.append(
        f"  state:      {d['state_size']} bytes ({d['inline_bytes']} inline in _metadata, "
        f"{d['state_files']} state files)"
    )
    if "integrity" in d:
        lines.append(f"  integrity:  {_fmt_integrity(d['integrity'])}")
    lines.append(f"  operators:  {len(d['operators'])}")
    for op in d["operators"]:
        lines.append(
            f"  - {op['operator_id']}: parallelism {op['parallelism']}, max parallelism "
            f"{op['max_parallelism']}, {op['state_size']} bytes"
        )
        for sub in op["subtasks"]:
            handles = sub["keyed"] + sub["operator"]
            if not handles:
                lines.append(f"      subtask {sub['subtask']}: no state")
            for h in handles:
                lines.append(f"      subtask {sub['subtask']}: {_fmt_handle(h)}")
    lines.append(f"  master states: {len(masters)}")
    for m in masters:
        lines.append(f"  - {printable(m['name'])} (version {m['version']}, {m['size']} bytes):")
        body = (
            f"<binary> {m['hex']}"
            if "hex" in m
            else json.dumps(m["value"], indent=2, sort_keys=True)
        )
        lines.extend("      " + line for line in body.splitlines())
    return "\n".join(lines)


# ---- commands ---------------------------------------------------------------------------------


def report_failed(entries: list[SnapshotDir]) -> None:
    """One line on stderr per snapshot directory whose ``_metadata`` could not be read."""
    for entry in entries:
        if entry.failed:
            report(f"skipped {entry.path} ({entry.status}): {entry.error}")


def _cmd_list(args: argparse.Namespace) -> int:
    entries = find_snapshot_dirs(args.directory)
    report_failed(entries)
    if args.json:
        print(json.dumps([e.to_json() for e in entries], indent=2))
        return 0
    if not entries:
        print(f"No checkpoints or savepoints under {printable(args.directory)}")
        return 0
    header = ("ID", "KIND", "STATUS", "METADATA", "STATE", "OPERATORS", "PATH")
    rows = [header] + [
        (
            "-"
            if e.checkpoint_id is None and e.dir_id is None
            else str(e.checkpoint_id if e.checkpoint_id is not None else e.dir_id),
            e.kind,
            e.status,
            "-" if e.metadata_size is None else str(e.metadata_size),
            "-" if e.state_size is None else str(e.state_size),
            "-" if e.operators is None else str(e.operators),
            printable(e.path),
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    return 0


def _cmd_latest(args: argparse.Namespace) -> int:
    latest, passed_over = latest_of(find_snapshot_dirs(args.directory))
    report_failed(passed_over)
    if latest is None:
        report(
            f"no complete checkpoint (chk-N/ with a readable {METADATA_FILE_NAME}) "
            f"under {args.directory}"
        )
        return EXIT_NOT_FOUND
    print(printable(latest.path))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    metadata, location = load_pointer(args.pointer)
    described = describe_metadata(metadata, location)
    described["integrity"] = integrity_summary(
        read_metadata_bytes(location.metadata_handle), metadata, default_trust()
    )
    if args.json:
        print(json.dumps(described, indent=2, sort_keys=True))
    else:
        print(format_description(described))
    return 0


def add_arguments(actions: Any) -> None:
    """Register ``list``, ``latest`` and ``inspect`` on the ``checkpoints`` subparsers."""
    p = actions.add_parser("list", help="list chk-N/ and savepoint-*/ directories, newest last")
    p.add_argument("directory", help="checkpoint base directory, job directory or URI")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_cmd_list)

    p = actions.add_parser(
        "latest",
        help="print the latest complete checkpoint (use it as execution.savepoint.path); "
        "exit 1 when there is none",
    )
    p.add_argument("directory", help="checkpoint base directory or job directory")
    p.set_defaults(handler=_cmd_latest)

    p = actions.add_parser("inspect", help="summarise a checkpoint's or savepoint's _metadata")
    p.add_argument("pointer", help="checkpoint/savepoint directory or its _metadata file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_cmd_inspect)
