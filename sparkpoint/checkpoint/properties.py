"""``CheckpointProperties``: what kind of snapshot a checkpoint is and when it is discarded.

The discard flags follow Flink's matrix (subsumed / finished / cancelled / failed / suspended):

=======================  =========  ========  =========  ======  =========
policy                   subsumed   finished  cancelled  failed  suspended
=======================  =========  ========  =========  ======  =========
NEVER_RETAIN             yes        yes       yes        yes     yes
RETAIN_ON_FAILURE        yes        yes       yes        no      yes
RETAIN_ON_CANCELLATION   yes        yes       no         no      no
savepoint                no         no        no         no      no
=======================  =========  ========  =========  ======  =========
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["CheckpointProperties", "CheckpointType", "JobStatus"]


class CheckpointType(enum.IntEnum):
    """Whether a snapshot is a checkpoint, a savepoint or a synchronous (stop) savepoint."""

    CHECKPOINT = 0
    SAVEPOINT = 1
    SAVEPOINT_SUSPEND = 2
    SAVEPOINT_TERMINATE = 3

    @property
    def is_savepoint(self) -> bool:
        """Whether this is any kind of savepoint."""
        return self is not CheckpointType.CHECKPOINT

    @property
    def is_synchronous(self) -> bool:
        """Whether this is a stop-with-savepoint (the job ends after it)."""
        return self in (CheckpointType.SAVEPOINT_SUSPEND, CheckpointType.SAVEPOINT_TERMINATE)


class JobStatus(enum.Enum):
    """The terminal job states that decide what happens to retained checkpoints."""

    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    FAILED = "FAILED"
    SUSPENDED = "SUSPENDED"

    @classmethod
    def of(cls, status: JobStatus | str) -> JobStatus:
        """The status named by ``status`` (a member or its name, any case)."""
        if isinstance(status, JobStatus):
            return status
        name = str(status).upper()
        try:
            return cls["CANCELED" if name == "CANCELLED" else name]
        except KeyError:
            names = ", ".join(m.name for m in cls)
            raise ValueError(f"Unknown job status {status!r}; expected one of {names}") from None


_RETENTION_NAMES = {
    0: "DELETE_ON_CANCELLATION",
    1: "RETAIN_ON_CANCELLATION",
    2: "NO_EXTERNALIZED_CHECKPOINTS",
}


@dataclass(frozen=True, slots=True)
class CheckpointProperties:
    """The type of a snapshot and the job outcomes on which its state is discarded."""

    forced: bool
    checkpoint_type: CheckpointType
    discard_subsumed: bool
    discard_finished: bool
    discard_cancelled: bool
    discard_failed: bool
    discard_suspended: bool
    unclaimed: bool = False

    NEVER_RETAIN_AFTER_TERMINATION: ClassVar[CheckpointProperties]
    RETAIN_ON_FAILURE: ClassVar[CheckpointProperties]
    RETAIN_ON_CANCELLATION: ClassVar[CheckpointProperties]

    @property
    def is_savepoint(self) -> bool:
        """Whether this snapshot is a savepoint (never discarded by the job)."""
        return self.checkpoint_type.is_savepoint

    @property
    def is_synchronous(self) -> bool:
        """Whether this is a stop-with-savepoint."""
        return self.checkpoint_type.is_synchronous

    def discard_on_job_status(self, status: JobStatus | str) -> bool:
        """Whether the snapshot is discarded when the job ends in ``status``."""
        status = JobStatus.of(status)
        return {
            JobStatus.FINISHED: self.discard_finished,
            JobStatus.CANCELED: self.discard_cancelled,
            JobStatus.FAILED: self.discard_failed,
            JobStatus.SUSPENDED: self.discard_suspended,
        }[status]

    @staticmethod
    def for_savepoint(forced: bool = True) -> CheckpointProperties:
        """A user-triggered savepoint: never discarded by the job."""
        return CheckpointProperties(
            forced, CheckpointType.SAVEPOINT, False, False, False, False, False
        )

    @staticmethod
    def for_sync_savepoint(forced: bool = True, terminate: bool = False) -> CheckpointProperties:
        """A stop-with-savepoint (suspend, or terminate with ``--drain``): never discarded."""
        kind = CheckpointType.SAVEPOINT_TERMINATE if terminate else CheckpointType.SAVEPOINT_SUSPEND
        return CheckpointProperties(forced, kind, False, False, False, False, False)

    @staticmethod
    def for_unclaimed_snapshot() -> CheckpointProperties:
        """A snapshot restored in NO_CLAIM mode: the job never deletes it."""
        return CheckpointProperties(
            False, CheckpointType.SAVEPOINT, False, False, False, False, False, unclaimed=True
        )

    @staticmethod
    def for_checkpoint(retention: object) -> CheckpointProperties:
        """The properties of a periodic checkpoint under an externalized retention policy.

        ``retention`` is an ``ExternalizedCheckpointRetention``/``Cleanup`` member, its name
        or its int value; ``None`` means no externalized checkpoints.
        """
        name = _retention_name(retention)
        if name == "DELETE_ON_CANCELLATION":
            return CheckpointProperties.RETAIN_ON_FAILURE
        if name == "RETAIN_ON_CANCELLATION":
            return CheckpointProperties.RETAIN_ON_CANCELLATION
        return CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION


def _retention_name(retention: object) -> str:
    if retention is None:
        return "NO_EXTERNALIZED_CHECKPOINTS"
    if isinstance(retention, int) and not isinstance(retention, bool):
        if retention in _RETENTION_NAMES:
            return _RETENTION_NAMES[retention]
    name = getattr(retention, "name", retention)
    if isinstance(name, str) and name.upper() in _RETENTION_NAMES.values():
        return name.upper()
    raise ValueError(
        f"Unknown externalized checkpoint retention {retention!r}; expected one of "
        + ", ".join(f"{n} ({v})" for v, n in _RETENTION_NAMES.items())
    )


CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION = CheckpointProperties(
    False, CheckpointType.CHECKPOINT, True, True, True, True, True
)
CheckpointProperties.RETAIN_ON_FAILURE = CheckpointProperties(
    False, CheckpointType.CHECKPOINT, True, True, True, False, True
)
CheckpointProperties.RETAIN_ON_CANCELLATION = CheckpointProperties(
    False, CheckpointType.CHECKPOINT, True, True, False, False, False
)
