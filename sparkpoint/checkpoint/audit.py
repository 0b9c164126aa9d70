"""Which files of a job's checkpoint directory its retained checkpoints reference.

``audit_checkpoint_directory`` walks ``<checkpoint dir>/<job-id>`` and compares every file in
it with the files that the ``_metadata`` of each complete checkpoint (``chk-N/_metadata``)
references, read back through the checked loader. Once cleanup has settled the two sets are
equal: no unreferenced file stays behind, no referenced file is missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from sparkpoint.checkpoint.fs_storage import CHECKPOINT_DIR_PREFIX
from sparkpoint.checkpoint.handles import FileStateHandle, StateObject, stream_handles
from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import load_checkpoint_metadata
from sparkpoint.checkpoint.paths import comparable_path
from sparkpoint.checkpoint.storage import METADATA_FILE_NAME, read_metadata_file
from sparkpoint.fs import get_filesystem

__all__ = ["DirectoryAudit", "audit_checkpoint_directory", "referenced_files", "state_files"]

_CHECKPOINT_DIR = re.compile(re.escape(CHECKPOINT_DIR_PREFIX) + r"(\d+)")


@dataclass(frozen=True)
class DirectoryAudit:
    """The files in a job's checkpoint directory against those its checkpoints reference
    (paths in ``comparable_path`` form)."""

    checkpoint_ids: tuple[int, ...]
    files: frozenset[str]
    referenced: frozenset[str]

    @property
    def unreferenced(self) -> frozenset[str]:
        """Files no retained checkpoint references (left behind by cleanup)."""
        return self.files - self.referenced

    @property
    def missing(self) -> frozenset[str]:
        """Files a retained checkpoint references that are not there (deleted too early)."""
        return self.referenced - self.files

    @property
    def exact(self) -> bool:
        """Whether the directory holds exactly the referenced files."""
        return self.files == self.referenced


def state_files(state: StateObject) -> Iterator[str]:
    """The paths of the files a state handle references (inline state has none)."""
    for handle in stream_handles(state):
        if isinstance(handle, FileStateHandle):
            yield handle.path


def referenced_files(metadata: CheckpointMetadata) -> set[str]:
    """The paths (``comparable_path`` form) of every state file ``metadata`` references."""
    out: set[str] = set()
    for op in metadata.operator_states:
        for sub in op.subtask_states.values():
            for handle in sub.all_handles():
                out.update(comparable_path(p) for p in state_files(handle))
    return out


def audit_checkpoint_directory(job_dir: str) -> DirectoryAudit:
    """Compare the files under ``job_dir`` with those its complete checkpoints reference."""
    job_dir = job_dir.rstrip("/") or job_dir
    fs = get_filesystem(job_dir)
    files = frozenset(
        comparable_path(info.path) for info in fs.list(job_dir, recursive=True) if not info.is_dir
    )
    ids: list[int] = []
    referenced: set[str] = set()
    for info in fs.list(job_dir):
        match = _CHECKPOINT_DIR.fullmatch(fs.name(info.path))
        metadata_path = fs.join(info.path, METADATA_FILE_NAME)
        if not info.is_dir or match is None or not fs.exists(metadata_path):
            continue
        data = read_metadata_file(metadata_path)
        metadata = load_checkpoint_metadata(data, info.path, metadata_path)
        ids.append(int(match.group(1)))
        referenced.add(comparable_path(metadata_path))
        referenced |= referenced_files(metadata)
    return DirectoryAudit(tuple(sorted(ids)), files, frozenset(referenced))
