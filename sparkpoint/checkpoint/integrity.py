"""What protects a loaded snapshot: whether its ``_metadata`` is signed (and verified with
the configured key) and how many of its state files carry a digest (``checkpoint inspect``)."""

from __future__ import annotations

from typing import Any

from sparkpoint.checkpoint.handles import FileStateHandle, stream_handles
from sparkpoint.checkpoint.metadata.checkpoint_metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import is_signed
from sparkpoint.checkpoint.trust import SnapshotTrust

__all__ = ["integrity_summary"]


def integrity_summary(
    data: bytes, metadata: CheckpointMetadata, trust: SnapshotTrust
) -> dict[str, Any]:
    """``signature`` (``verified``: signed and checked against the configured key;
    ``not verified``: signed, no key configured; ``none``) and the state files with and
    without a digest (files of snapshots written before digests have none: read unchecked)."""
    files: dict[str, FileStateHandle] = {}
    for op in metadata.operator_states:
        for sub in op.subtask_states.values():
            for state in sub.all_handles():
                for handle in stream_handles(state):
                    if isinstance(handle, FileStateHandle):
                        files[handle.path] = handle
    with_digest = sum(1 for h in files.values() if h.digest is not None)
    signed = is_signed(data)
    return {
        "signature": ("verified" if trust.signed else "not verified") if signed else "none",
        "state_files_with_digest": with_digest,
        "state_files_without_digest": len(files) - with_digest,
    }
