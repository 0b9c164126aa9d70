"""The exception hierarchy of sparkpoint: one root, one checkpoint exception with a reason."""

from __future__ import annotations

import enum

__all__ = [
    "CheckpointException",
    "CheckpointFailureReason",
    "ConfigurationError",
    "CorruptStateError",
    "JobExecutionError",
    "KafkaAccessError",
    "MetadataFormatError",
    "RecordsDeletedError",
    "RestoreError",
    "SnapshotSignatureError",
    "SparkpointError",
    "StateDecodeError",
    "StateLostError",
    "StorageError",
    "UnsafeStatePathError",
    "UntrustedSnapshotError",
]


class SparkpointError(Exception):
    """Root of every error raised by sparkpoint itself."""


class ConfigurationError(SparkpointError, ValueError):
    """An invalid configuration value; the message names the key, the value and what is allowed."""


class StorageError(SparkpointError, OSError):
    """Checkpoint storage could not be read or written (unreachable, missing, refused)."""


class MetadataFormatError(SparkpointError, ValueError):
    """A ``_metadata`` file is corrupt, truncated or of an unknown version.

    The message always names the file (when known), what is wrong and the byte offset.
    """


class UnsafeStatePathError(MetadataFormatError):
    """A ``_metadata`` names a state file outside the directories of its snapshot.

    The message names the ``_metadata`` file, the offending path, why it is refused and the
    directories the snapshot's files may lie in.
    """


class SnapshotSignatureError(MetadataFormatError):
    """A signing key is configured and a ``_metadata`` is unsigned, or its HMAC does not
    match (tampered with, or signed with another key). The message names the file."""


class KafkaAccessError(SparkpointError):
    """Kafka refused the job's principal (a missing ACL, named) or its credentials or
    certificates: no retry or restart can fix it, so the job fails at once."""


class RestoreError(SparkpointError):
    """State cannot be restored: missing files, incompatible savepoint, max-parallelism clash."""


class CorruptStateError(RestoreError):
    """A state file does not hold what its handle records: its bytes do not match the digest,
    its length differs, or an offset points outside it. The message names the file."""


class StateDecodeError(CorruptStateError, ValueError):
    """Restored state bytes that their state's serializer cannot read (a value, key or user
    key of another length or shape). The message names the state."""


class UntrustedSnapshotError(RestoreError):
    """A snapshot's state is refused before it is unpickled: it is pickled while
    ``sparkpoint.snapshot.allow-pickle`` is false, or a header declares pickle where the
    state is typed. The message names the file and what was refused."""


class SubtaskRestoreError(RestoreError):
    """A subtask could not restore its state from the snapshot being restored (a corrupt or
    truncated state file, say); the message names the files, the operator and the subtask.

    The job master counts these per snapshot and fails the job after
    ``sparkpoint.restart.restore-attempts`` of them, whatever the restart strategy allows.
    """


class RecordsDeletedError(SparkpointError):
    """A source's position points below what its input still holds: Kafka's retention (or a
    DeleteRecords) removed records the job had not read. No restart brings them back, so the
    job fails at once; the message names the partition, the position and the log start."""


class StateLostError(SparkpointError):
    """A keyed subtask found no local state, or stale state, for the epoch it must run.

    The job master reacts by restoring every subtask from the latest completed checkpoint.
    """


class JobExecutionError(SparkpointError):
    """The job failed and its restart strategy allows no further attempt."""


class JavaFunctionError(SparkpointError, TypeError):
    """A PyFlink wrapper of a Java class (``SourceFunction``, ``SinkFunction``) was used: there
    is no JVM user code in sparkpoint; the message names the replacement."""


class CheckpointFailureReason(enum.Enum):
    """Why a checkpoint failed; ``pre_flight`` failures never count as tolerable failures."""

    def __init__(self, pre_flight: bool, message: str) -> None:
        self.pre_flight = pre_flight
        self.message = message

    PERIODIC_SCHEDULER_SHUTDOWN = (True, "Periodic checkpoint scheduler is shut down.")
    TOO_MANY_CHECKPOINT_REQUESTS = (
        True,
        "The maximum number of queued checkpoint requests exceeded",
    )
    MINIMUM_TIME_BETWEEN_CHECKPOINTS = (
        True,
        "The minimum time between checkpoints is still pending. "
        "Checkpoint will be triggered after the minimum time.",
    )
    NOT_ALL_REQUIRED_TASKS_RUNNING = (True, "Not all required tasks are currently running.")
    CHECKPOINT_EXPIRED = (False, "Checkpoint expired before completing.")
    CHECKPOINT_SUBSUMED = (False, "Checkpoint has been subsumed.")
    CHECKPOINT_DECLINED = (False, "Checkpoint was declined.")
    CHECKPOINT_ASYNC_EXCEPTION = (False, "Asynchronous task checkpoint failed.")
    CHECKPOINT_COORDINATOR_SHUTDOWN = (False, "CheckpointCoordinator shutdown.")
    CHECKPOINT_COORDINATOR_SUSPEND = (False, "Checkpoint Coordinator is suspending.")
    TASK_FAILURE = (False, "Task has failed.")
    TASK_CHECKPOINT_FAILURE = (False, "Task local checkpoint failure.")
    FINALIZE_CHECKPOINT_FAILURE = (False, "Failure to finalize checkpoint.")
    TRIGGER_CHECKPOINT_FAILURE = (False, "Trigger checkpoint failure.")
    IO_EXCEPTION = (False, "An Exception occurred while triggering the checkpoint.")

    @property
    def counts_as_failure(self) -> bool:
        """Whether the tolerable-failure counter counts this reason (Flink's failure manager)."""
        return self in _COUNTED


_COUNTED = frozenset(
    {
        CheckpointFailureReason.IO_EXCEPTION,
        CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
        CheckpointFailureReason.CHECKPOINT_DECLINED,
        CheckpointFailureReason.CHECKPOINT_EXPIRED,
    }
)


class CheckpointException(SparkpointError):
    """A checkpoint failed for the given reason."""

    def __init__(
        self,
        reason: CheckpointFailureReason,
        detail: str | None = None,
        checkpoint_id: int | None = None,
    ) -> None:
        self.reason = reason
        self.checkpoint_id = checkpoint_id
        msg = reason.message if detail is None else f"{reason.message} {detail}"
        if checkpoint_id is not None:
            msg = f"Checkpoint {checkpoint_id}: {msg}"
        super().__init__(msg)
