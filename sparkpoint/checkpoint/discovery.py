"""Checkpoint discovery: the ``chk-<N>/`` and ``savepoint-*/`` directories under a base
directory, what their ``_metadata`` says, and the metadata a pointer names.

A *base* directory is searched for ``chk-<N>/`` and ``savepoint-*/`` directly inside it and
one level down (``<base>/<job-id>/chk-<N>/``), so the checkpoint directory of a job, the
configured ``execution.checkpointing.dir`` and a savepoint directory all work. Any URI the
filesystem layer serves (``file://``, ``s3://``, ...) is accepted. The CLI's ``checkpoints``
and ``history`` commands and the state processor read checkpoints through it.

A ``_metadata`` is read only when it is a regular file within ``MAX_METADATA_SIZE``
(``storage.read_metadata_file``). One that cannot be read or parsed marks its own
directory ``unreadable`` or ``corrupt`` (with the error) and never fails the search.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.fs_location import resolve_checkpoint_pointer
from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint, load_checkpoint_metadata
from sparkpoint.checkpoint.storage import (
    METADATA_FILE_NAME,
    CompletedCheckpointStorageLocation,
    read_metadata_file,
)
from sparkpoint.errors import MetadataFormatError
from sparkpoint.fs import get_filesystem
from sparkpoint.fs.base import FileSystem

__all__ = [
    "SnapshotDir",
    "find_snapshot_dirs",
    "latest_checkpoint",
    "latest_of",
    "load_pointer",
]

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
    # complete | incomplete (no _metadata) | corrupt (not a valid _metadata) | unreadable
    # (not a regular file, too large, or the read failed)
    status: str = "incomplete"
    checkpoint_id: int | None = None
    metadata_size: int | None = None
    state_size: int | None = None
    operators: int | None = None
    error: str | None = None
    metadata: CheckpointMetadata | None = field(default=None, repr=False, compare=False)
    """The parsed ``_metadata`` of a complete directory."""

    @property
    def complete(self) -> bool:
        """Whether ``_metadata`` exists and reads back without error."""
        return self.status == "complete"

    @property
    def failed(self) -> bool:
        """Whether a ``_metadata`` is there but could not be read or parsed (``error`` says
        why): the directory a search skips and reports."""
        return self.status in ("corrupt", "unreadable")

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
    try:
        if not fs.exists(metadata_path) or fs.is_dir(metadata_path):
            return entry
        data = read_metadata_file(metadata_path)
        entry.metadata_size = len(data)
        metadata = load_checkpoint_metadata(data, path, metadata_path)
    except MetadataFormatError as exc:
        entry.status, entry.error = "corrupt", str(exc)
        return entry
    except OSError as exc:
        entry.status, entry.error = "unreadable", _io_error(exc, metadata_path)
        return entry
    except Exception as exc:  # one crafted _metadata must not hide every other snapshot
        entry.status = "corrupt"
        entry.error = f"Cannot read {metadata_path}: {type(exc).__name__}: {exc}"
        return entry
    if dir_id is not None and metadata.checkpoint_id != dir_id:
        entry.status = "corrupt"
        entry.error = (
            f"{metadata_path} holds checkpoint {metadata.checkpoint_id}, not {dir_id} as its "
            "directory's name says (a copied or crafted _metadata?)"
        )
        return entry
    entry.status = "complete"
    entry.metadata = metadata
    entry.checkpoint_id = metadata.checkpoint_id
    entry.state_size = metadata.state_size
    entry.operators = len(metadata.operator_states)
    return entry


def _io_error(exc: OSError, path: str) -> str:
    """``exc`` as a message that names the file (``OSError`` text may omit it)."""
    text = str(exc)
    return text if path in text else f"{text}: {path}"


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

    Raises ``FileNotFoundError`` when ``base`` does not exist, ``NotADirectoryError`` when
    it is not a directory.
    """
    base = base.rstrip("/") or base
    fs = get_filesystem(base)
    if not fs.is_dir(base):
        if fs.exists(base):
            raise NotADirectoryError(f"Checkpoint directory '{base}' is not a directory")
        raise FileNotFoundError(f"Checkpoint directory '{base}' does not exist")
    entries = [_inspect_dir(fs, p, kind, n) for p, kind, n in _candidates(fs, base)]
    entries.sort(key=lambda e: (e.sort_id, e.kind == "savepoint", e.path))
    return entries


def latest_of(entries: Sequence[SnapshotDir]) -> tuple[SnapshotDir | None, list[SnapshotDir]]:
    """The complete checkpoint (not savepoint) with the highest id among ``entries`` (sorted
    as ``find_snapshot_dirs`` returns them), and the failed checkpoints newer than it that
    were passed over (all failed checkpoints when none is complete)."""
    checkpoints = [e for e in entries if e.kind == "checkpoint"]
    complete = [e for e in checkpoints if e.complete]
    latest = complete[-1] if complete else None
    floor = -1 if latest is None else latest.sort_id
    return latest, [e for e in checkpoints if e.failed and e.sort_id > floor]


def latest_checkpoint(base: str) -> SnapshotDir | None:
    """The complete checkpoint (not savepoint) with the highest id under ``base``; one whose
    ``_metadata`` cannot be read is passed over."""
    return latest_of(find_snapshot_dirs(base))[0]
