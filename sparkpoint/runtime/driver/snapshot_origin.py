"""Whether the snapshot a job starts from is trusted with code (pickled state): signed with
the configured signing key, or the job's own: signed with the origin key of the job's
checkpoint directory (``checkpoint.origin``), i.e. written by a job of that directory.

A signing key's signature binds the job name and the checkpoint id (both are in the signed
``_metadata``): a snapshot signed for a job of another name is refused, and a ``chk-N``
directory holding another checkpoint's ``_metadata`` is refused when it is loaded
(``file_format``). The origin key marks the directory's jobs, not one job.
"""

from __future__ import annotations

from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.checkpoint.metadata.file_format import signed_with
from sparkpoint.checkpoint.origin import origin_key
from sparkpoint.checkpoint.trust import SnapshotTrust
from sparkpoint.config import SnapshotOptions
from sparkpoint.errors import SnapshotSignatureError
from sparkpoint.runtime.driver.master_state import JobMasterState

__all__ = ["restore_trusted", "untrusted_commits_note", "untrusted_restore_note"]


def restore_trusted(
    trust: SnapshotTrust, data: bytes, metadata: CheckpointMetadata, job_name: str, source: str
) -> bool:
    """Whether the restored ``_metadata`` (``data``, already loaded as ``metadata`` with
    ``trust``, so a configured key has verified it) is trusted; ``SnapshotSignatureError``
    when the signing key signed it for a job of another name."""
    try:
        master = JobMasterState.from_metadata(metadata)
    except (KeyError, TypeError, ValueError):
        master = None  # malformed: refused by the master state's own check
    recorded = master.job_name if master is not None else None
    if trust.signed:
        if recorded is not None and recorded != job_name:
            raise SnapshotSignatureError(
                f"Refusing checkpoint metadata file {source}: it is signed for job "
                f"{recorded!r}, and this job is {job_name!r} (a signature binds the job "
                f"name). Run the job as {recorded!r} to restore it."
            )
        return True
    if trust.origin_dir is None:
        return False
    key = origin_key(trust.origin_dir, create=False)
    return key is not None and signed_with(data, key)


def untrusted_restore_note(trust: SnapshotTrust, pointer: str) -> str:
    """What the log says when a job restores a snapshot it reads as plain data only."""
    key = SnapshotOptions.ALLOW_PICKLE.key
    return (
        f"{pointer} is neither signed with the configured signing key nor this job's own "
        f"(checkpoint directory {trust.origin_dir}): its pickled state is read as plain data "
        f"only, and this run's checkpoints are not marked as the job's own. Set {key}=true "
        "if you trust who wrote it."
    )


def untrusted_commits_note() -> str:
    """What a sink's refusal of an untrusted snapshot's commits adds to where they are."""
    return (
        "a snapshot that is neither this job's own nor signed, so its sink commits must be "
        f"this job's: set {SnapshotOptions.ALLOW_PICKLE.key}=true if you trust who wrote it"
    )
