"""Checkpoint discovery: the ``chk-<N>/`` and ``savepoint-*/`` directories under a base
directory, what their ``_metadata`` says, and the metadata a pointer names.

A *base* directory is searched for ``chk-<N>/`` and ``savepoint-*/`` directly inside it and
one level down (``<base>/<job-id>/chk-<N>/``), so the checkpoint directory of a job, the
configured ``execution.checkpointing.dir`` and a savepoint directory all work. Any URI the
filesystem layer serves (``file://``, ``s3://``, ...) is accepted. The CLI's ``checkpoints``
and ``history`` commands and the state processor read checkpoints through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.fs_location import resolve_checkpoint_pointer
from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint, load_checkpoint_metadata
from sparkpoint.checkpoint.storage import METADATA_FILE_NAME, CompletedCheckpointStorageLocation
from sparkpoint.errors import MetadataFormatError
from sparkpoint.fs import get_filesystem
from sparkpoint.fs.base import FileSystem

__all__ = ["SnapshotDir", "find_snapshot_dirs", "latest_checkpoint", "load_pointer"]

_CHK = re.compile(r"^chk-(\d+)$")
_SAVEPOINT = re.compile(r"^savepoint-")


class _PointerResolver:
    """Resolves a checkpoint/savepoint directory or ``_metadata`` file (Flink's rules)."""

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)


def load_pointer(pointer: str) -> tuple[CheckpointMetadata, CompletedCheckpointStorageLocation]:
    """The metadata and location a pointer (directory or ``_metadata`` file) names."""
    return load_checkpoint(_PointerResolver(), pointer)


@dataclass
class SnapshotDir:
    """One ``chk-N`` or ``savepoint-*`` directory and what its ``_metadata`` says."""

    path: str
    kind: str  # "checkpoint" | "savepoint"
    dir_id: int | None  # N of chk-N (None for savepoints)
    status: str = "incomplete"  # complete | incomplete (no _metadata) | corrupt
    checkpoint_id: int | None = None
    metadata_size: int | None = None
    state_size: int | None = None
    operators: int | None = None
    error: str | None = None

    @property
    def complete(self) -> bool:
        """Whether ``_metadata`` exists and reads back without error."""
        return self.status == "complete"

    @property
    def sort_id(self) -> int:
        """The checkpoint id to order by (savepoints by the id in their metadata)."""
        if self.checkpoint_id is not None:
            return self.checkpoint_id
        return self.dir_id if self.dir_id is not None else -1

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON (``sparkpoint checkpoints list --json``)."""
        return {
            "path": self.path,
            "kind": self.kind,
            "id": self.checkpoint_id if self.checkpoint_id is not None else self.dir_id,
            "status": self.status,
            "metadata_size": self.metadata_size,
            "state_size": self.state_size,
            "operators": self.operators,
            "error": self.error,
        }


def _inspect_dir(fs: FileSystem, path: str, kind: str, dir_id: int | None) -> SnapshotDir:
    entry = SnapshotDir(path, kind, dir_id)
    metadata_path = fs.join(path, METADATA_FILE_NAME)
    if not fs.exists(metadata_path) or fs.is_dir(metadata_path):
        return entry
    data = fs.read_bytes(metadata_path)
    entry.metadata_size = len(data)
    try:
        metadata = load_checkpoint_metadata(data, path, metadata_path)
    except MetadataFormatError as exc:
        entry.status = "corrupt"
        entry.error = str(exc)
        return entry
    entry.status = "complete"
    entry.checkpoint_id = metadata.checkpoint_id
    entry.state_size = metadata.state_size
    entry.operators = len(metadata.operator_states)
    return entry


def _candidates(fs: FileSystem, base: str) -> list[tuple[str, str, int | None]]:
    """``(path, kind, N)`` of snapshot directories in ``base`` and one level below it."""
    found: list[tuple[str, str, int | None]] = []
    for info in fs.list(base):
        if not info.is_dir:
            continue
        name = fs.name(info.path)
        match = _CHK.match(name)
        if match:
            found.append((info.path, "checkpoint", int(match.group(1))))
        elif _SAVEPOINT.match(name):
            found.append((info.path, "savepoint", None))
        elif name not in ("shared", "taskowned"):
            for sub in fs.list(info.path):
                sub_match = _CHK.match(fs.name(sub.path))
                if sub.is_dir and sub_match:
                    found.append((sub.path, "checkpoint", int(sub_match.group(1))))
    return found


def find_snapshot_dirs(base: str) -> list[SnapshotDir]:
    """Every checkpoint and savepoint directory under ``base``, oldest first.

    Raises ``FileNotFoundError`` when ``base`` is not a directory.
    """
    base = base.rstrip("/") or base
    fs = get_filesystem(base)
    if not fs.is_dir(base):
        raise FileNotFoundError(f"Checkpoint directory '{base}' does not exist")
    entries = [_inspect_dir(fs, p, kind, n) for p, kind, n in _candidates(fs, base)]
    entries.sort(key=lambda e: (e.sort_id, e.kind == "savepoint", e.path))
    return entries


def latest_checkpoint(base: str) -> SnapshotDir | None:
    """The complete checkpoint (not savepoint) with the highest id under ``base``."""
    complete = [e for e in find_snapshot_dirs(base) if e.kind == "checkpoint" and e.complete]
    return complete[-1] if complete else None
