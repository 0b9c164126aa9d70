"""The files of a heap backend's local commits: the JSON marker, published atomically, and
the key-group and delta files it names; files no marker references are deleted.

A marker names, per key group, its whole-group file and state names (``files``), the delta
files to apply over them in order (``deltas``), the epoch, the runtime's ``extra`` bytes,
its owner (job, operator, max parallelism, key-group range) and the previous commit
(``prev``), so one commit can be reverted.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from typing import Any

from sparkpoint.errors import StateLostError

__all__ = [
    "MARKER",
    "collect_garbage",
    "deltas_by_key_group",
    "link_or_copy",
    "read_file",
    "read_marker",
    "write_file",
    "write_marker",
]

MARKER = "MARKER.json"


def read_marker(state_dir: str, owner: Mapping[str, Any]) -> dict[str, Any] | None:
    """The marker in ``state_dir`` when its owner fields equal ``owner`` (else ``None``:
    the directory holds another subtask's state); a corrupt marker is ``StateLostError``."""
    path = os.path.join(state_dir, MARKER)
    try:
        with open(path, encoding="utf-8") as f:
            marker = json.load(f)
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise StateLostError(f"Local heap state marker {path} is corrupt: {e}") from e
    if any(marker.get(name) != value for name, value in owner.items()):
        return None
    return marker  # type: ignore[no-any-return]


def write_marker(state_dir: str, marker: Mapping[str, Any]) -> None:
    """Publish ``marker`` as the directory's commit (write, then rename)."""
    # Atomic against a crashed process (write, then rename), but not fsynced: only the
    # executor that wrote local state reads it, an OS crash ends that executor (no
    # later executor reads its directory), and the data files are not fsynced either.
    path = os.path.join(state_dir, MARKER)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    # json.dumps, not json.dump: dump encodes in pure Python chunk by chunk (~10x slower
    # on a marker naming every key group's file; it ran in every keyed task's epoch).
    text = json.dumps(marker)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def read_file(state_dir: str, fname: str) -> bytes:
    """The bytes of a file a marker names; a missing one is ``StateLostError``."""
    try:
        with open(os.path.join(state_dir, fname), "rb") as f:
            return f.read()
    except FileNotFoundError as e:
        raise StateLostError(f"Local heap state file {fname} is missing: {e}") from e


def write_file(state_dir: str, fname: str, data: bytes) -> None:
    """Write a key-group or delta file (published by the next marker)."""
    with open(os.path.join(state_dir, fname), "wb") as f:
        f.write(data)


def collect_garbage(state_dir: str, marker: Mapping[str, Any]) -> None:
    """Delete every file neither ``marker`` nor its previous commit references."""
    keep = {MARKER}
    for commit in (marker, marker.get("prev")):
        if commit:
            keep |= {f for f, _ in commit["files"].values()}
            keep |= {f for f, _ in commit.get("deltas") or []}
    for name in os.listdir(state_dir):
        if name not in keep and not name.startswith(MARKER):
            try:
                os.remove(os.path.join(state_dir, name))
            except FileNotFoundError:
                pass


def deltas_by_key_group(commit: Mapping[str, Any]) -> dict[int, list[str]]:
    """Key group -> the delta files of ``commit`` that apply to it, in order."""
    out: dict[int, list[str]] = {}
    for fname, kgs in commit.get("deltas") or []:
        for kg in kgs:
            out.setdefault(kg, []).append(fname)
    return out


def link_or_copy(src: str, dst: str) -> None:
    """Hard-link ``src`` as ``dst``, or copy it where the filesystem has no hard links."""
    try:
        os.link(src, dst)
    except OSError:  # no hard links on this filesystem
        shutil.copyfile(src, dst)
