"""The messages between the job master (driver) and the stage tasks (executors).

Downwards, once per epoch, every task gets the same ``EpochSpec`` (with the job's constant
``JobSpec``): what to read, the watermark, the processing time, the checkpoint to snapshot
into and, for subtasks without usable local state, what to restore from. Upwards, every
task sends one ``TaskReport``: where it ran, snapshot and changelog acknowledgements, sink
output, watermarks, statistics and metrics, what it restored or found missing, and the operator
(broadcast) state its subtask ended the epoch with, which the driver hands to the next
epoch's ``EpochSpec``. Everything here is
picklable and holds no Spark object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from sparkpoint.checkpoint.handles import (
        KeyedStateHandle,
        OperatorStateHandle,
        StreamStateHandle,
    )
    from sparkpoint.checkpoint.storage import (
        CheckpointStorage,
        CheckpointStorageLocationReference,
    )
    from sparkpoint.connectors.source import SplitRange
    from sparkpoint.metrics.record_times import SourceRecordTimes
    from sparkpoint.metrics.sample import MetricKey, TaskMetricsReport
    from sparkpoint.runtime.graph import Partitioning
    from sparkpoint.state.backend import StateBackendFactory

__all__ = [
    "CarriedState",
    "ChangelogAck",
    "CheckpointRequest",
    "EpochSpec",
    "ExecutorIdentity",
    "JobSpec",
    "OutputRoute",
    "RestoreReason",
    "SinkOutput",
    "SnapshotAck",
    "StageRoutes",
    "StateLost",
    "SubtaskRestore",
    "SubtaskRestored",
    "TaskFaultHooks",
    "TaskReport",
    "UploadState",
    "UploadStatus",
]


class RestoreReason(StrEnum):
    """Why a keyed subtask restores its state instead of using its local state."""

    START = "start"  # first epoch of the job (empty state or a savepoint/checkpoint)
    FAILOVER = "failover"  # whole-job rollback to the latest completed checkpoint
    SUBTASK = "subtask"  # this subtask alone: its local state is gone or unusable


@dataclass(frozen=True)
class CheckpointRequest:
    """A checkpoint (or savepoint) the tasks of this epoch snapshot into."""

    checkpoint_id: int
    storage: CheckpointStorage  # configuration, picklable
    location_reference: CheckpointStorageLocationReference
    snapshot_type: str  # a SnapshotType
    # Upload in the background on the executor (acknowledged in later epochs' reports)
    # instead of within the task; savepoints and synchronous backends upload in the task.
    asynchronous: bool = False
    # Changelog checkpoints (``JobSpec.changelog_checkpoints``): False when keyed subtasks
    # that keep a changelog take no snapshot, the driver composes their handles from the
    # latest materialization and the changelog entries since.
    materialize: bool = True
    # With ``materialize`` False: those subtasks also start a periodic materialization in
    # the background, identified by ``checkpoint_id`` (reported in ``TaskReport``'s
    # ``materializations``; checkpoints go on without it until the driver adopts it).
    materialize_in_background: bool = False
    # With ``asynchronous``: how long a keyed subtask waits for its upload before its task
    # ends (sparkpoint.epoch.upload-wait); one done by then is reported with this epoch.
    upload_wait_ms: int = 0


@dataclass(frozen=True)
class SubtaskRestore:
    """What one keyed subtask restores when its local state is not usable: the keyed
    handles of a completed checkpoint cut to its key groups, then the durable changes of
    every later epoch (oldest first)."""

    handles: tuple[KeyedStateHandle, ...]
    changelog: tuple[StreamStateHandle, ...] = ()
    reason: RestoreReason = RestoreReason.START


class TaskFaultHooks(Protocol):
    """Task-side fault injection (``sparkpoint.testing.Faults``); must be picklable."""

    def after_local_commit(self, operator_id: str, subtask: int, epoch: int) -> None:
        """Called after a keyed subtask committed its state locally, before it reports."""

    def before_upload(self, operator_id: str, subtask: int, checkpoint_id: int) -> None:
        """Called in the upload thread before an asynchronous snapshot upload starts."""


@dataclass(frozen=True)
class OutputRoute:
    """One output edge of a stage: records of its member ``exit_index`` go to the consumer whose
    subtasks are channels ``[offset, offset + parallelism)`` of the stage's exchange, as
    its input ``input_index``, partitioned by ``partitioning`` (``graph.Partitioning``)."""

    exit_index: int  # position in ``Stage.members`` (node ids may repeat across jobs)
    input_index: int
    partitioning: Partitioning
    offset: int
    parallelism: int
    max_parallelism: int


@dataclass(frozen=True)
class StageRoutes:
    """Where a stage's rows go. Every task sends exactly one item to each of the
    ``channels`` of its exchange (consumers pin their partitions by that count)."""

    channels: int
    outputs: tuple[OutputRoute, ...]
    meta_channels: tuple[int, ...]  # every subtask of every consumer: watermarks
    report_offset: int  # reports go to the first consumer: report_offset + i % report_p
    report_parallelism: int


@dataclass(frozen=True)
class JobSpec:
    """What every task of every epoch of one job run shares."""

    job_id: str
    job_name: str
    application_id: str  # Spark's: local state lives per application and executor
    state_backend: StateBackendFactory
    batch_mode: bool
    # None: the executor's own Spark local directory; else sparkpoint.local-state.dir.
    local_state_dir: str | None
    job_parameters: Mapping[str, str] = field(default_factory=dict)
    final_stage_ids: frozenset[int] = frozenset()
    routes: Mapping[int, StageRoutes] = field(default_factory=dict)  # stages with outputs
    fs_options: Mapping[str, str] = field(default_factory=dict)
    # Where keyed subtasks write the durable changes of each epoch (None: they do not).
    changelog_storage: CheckpointStorage | None = None
    # state.backend.changelog.enabled: every epoch's changes are stored, and checkpoint
    # snapshots (materializations) are written as shared state.
    changelog_checkpoints: bool = False
    # Bytes per second one subtask's background materialization uploads (None: no limit).
    materialization_rate: int | None = None
    faults: TaskFaultHooks | None = None
    # False when pipeline.auto-watermark-interval is 0: only ended splits emit a watermark.
    periodic_watermarks: bool = True
    # sparkpoint.snapshot.allow-pickle: False reads pickled state as plain data only.
    allow_pickle: bool = True
    # sparkpoint.restart.restore-timeout in seconds (None: no deadline): a task that
    # restores state ends its worker past it (runtime/task/restore_watchdog.py).
    restore_timeout_s: float | None = None


@dataclass(frozen=True)
class EpochSpec:
    """Everything the tasks of one run of one epoch need (pickled into the Spark job).

    ``run`` numbers the Spark jobs of a job run; a local commit records it, so a task
    accepts local state only if it was committed by ``prev_run``, the run whose results the
    driver accepted for the previous epoch.
    """

    job: JobSpec
    epoch: int
    run: int
    prev_run: int | None
    incarnation: int
    end_of_input: bool
    watermarks: Mapping[str, int]
    generator_state: Mapping[str, int]
    source_ranges: Mapping[int, list[SplitRange]]  # stage id -> one per partition
    # Processing time of this epoch in every task (timers, TTL): the driver's clock, read
    # once when the epoch was planned, so all tasks and retries see the same time.
    processing_time_ms: int
    checkpoint: CheckpointRequest | None = None
    # operator id -> subtask -> what to restore when the local state is not usable
    restore: Mapping[str, Mapping[int, SubtaskRestore]] = field(default_factory=dict)
    # operator id -> subtask -> the OperatorStateHandles (broadcast state) the subtask
    # starts the epoch from: what it ended the accepted run of the previous epoch with, or
    # a checkpoint's handles redistributed to the current parallelism after a restore.
    operator_state: Mapping[str, Mapping[int, tuple[OperatorStateHandle, ...]]] = field(
        default_factory=dict
    )
    notify_complete: int | None = None
    # Asynchronous uploads: checkpoints still waiting for them (this epoch's included), and
    # recently aborted ones (an upload that finishes after its abort deletes its files).
    pending_checkpoints: frozenset[int] = frozenset()
    aborted_checkpoints: frozenset[int] = frozenset()
    # Background materializations (``CheckpointRequest.materialize_in_background``): the one
    # still uploading, recently abandoned ones (their uploads stop and delete their files),
    # and the one the latest completed checkpoint references (the keyed backends treat it
    # as their confirmed snapshot, as notify_complete does without changelog checkpoints).
    pending_materializations: frozenset[int] = frozenset()
    aborted_materializations: frozenset[int] = frozenset()
    notify_materialized: int | None = None
    # Entries of ``watermarks`` (``operator@split``) of source splits idle for their
    # strategy's ``with_idleness`` timeout: left out of the minimum watermark.
    idle_watermarks: frozenset[str] = frozenset()
    # The combined watermark the previous epoch shipped: leaving idle splits out must not
    # move it back when they read again (Java's Long.MIN_VALUE: none yet).
    watermark_floor: int = -(2**63)
    # Task groups (``task_groups``): stage id -> the subtasks each Spark task of the stage
    # runs, one after the other (absent: one subtask per task); stage id -> the shuffle
    # partition of each channel of the exchange the stage writes (absent: the channel).
    task_groups: Mapping[int, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    shuffle_partitions: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    # operator id -> subtask -> the user metrics' values the driver holds: a subtask's
    # counters, meters and distributions start from them (``sparkpoint.metrics``).
    metric_bases: Mapping[str, Mapping[int, Mapping[MetricKey, Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecutorIdentity:
    """Where a task ran: the Spark executor id and host, and the Python worker's pid."""

    executor_id: str
    host: str
    pid: int


@dataclass(frozen=True)
class SnapshotAck:
    """A subtask's snapshot for the epoch's checkpoint: of its keyed state, or (with
    ``operator_state``) of its operator (broadcast) state."""

    operator_id: str
    subtask: int
    # A keyed handle, or an operator handle with ``operator_state``; None: nothing to store.
    handle: KeyedStateHandle | OperatorStateHandle | None
    state_size: int
    operator_state: bool = False
    # No snapshot: the epoch's changelog entry stands for it (CheckpointRequest.materialize).
    changelog: bool = False


@dataclass(frozen=True)
class CarriedState:
    """The operator (broadcast) state a subtask ended its run of the epoch with, held in
    memory (``None``: empty), for the driver to hand to the subtask's next epoch."""

    operator_id: str
    subtask: int
    handle: OperatorStateHandle | None


class UploadState(StrEnum):
    """Where an asynchronous upload stands: ``running``, ``done`` (with the handle),
    ``failed`` (with the error) or ``lost`` (its Python worker died before it finished)."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    LOST = "lost"


@dataclass(frozen=True)
class UploadStatus:
    """Where a keyed subtask's asynchronous upload for one checkpoint stands."""

    # The states under the names the driver reads them by (``UploadState.DONE``).
    RUNNING: ClassVar[UploadState] = UploadState.RUNNING
    DONE: ClassVar[UploadState] = UploadState.DONE
    FAILED: ClassVar[UploadState] = UploadState.FAILED
    LOST: ClassVar[UploadState] = UploadState.LOST

    operator_id: str
    subtask: int
    checkpoint_id: int
    state: UploadState
    handle: KeyedStateHandle | None = None  # when done
    state_size: int = 0
    detail: str = ""


@dataclass(frozen=True)
class ChangelogAck:
    """The durable record of what one epoch changed in a keyed subtask's state."""

    operator_id: str
    subtask: int
    epoch: int
    # None when storing the entry failed (subtasks then cannot restore alone until a
    # checkpoint); the driver drops those before it reads the handles.
    handle: StreamStateHandle | None
    size: int


@dataclass(frozen=True)
class SinkOutput:
    """What a sink writer staged (transactional) or produced (collect, print) in a task."""

    operator_id: str
    subtask: int
    committables: tuple[Any, ...]
    transactional: bool


@dataclass(frozen=True)
class SubtaskRestored:
    """A keyed subtask replaced its local state by restored state in this task."""

    operator_id: str
    subtask: int
    reason: RestoreReason
    changelog_entries: int
    seconds: float


@dataclass(frozen=True)
class StateLost:
    """A keyed subtask found no usable local state and had nothing to restore from: it did
    not process the epoch (the driver discards the run and runs the epoch again)."""

    operator_id: str
    subtask: int
    detail: str


@dataclass(frozen=True)
class TaskReport:
    """Everything one task tells the driver about its run of an epoch."""

    stage: int
    subtask: int
    attempt: int
    executor: ExecutorIdentity
    records_in: int = 0
    seconds: float = 0.0
    snapshots: tuple[SnapshotAck, ...] = ()
    changelogs: tuple[ChangelogAck, ...] = ()
    sink_outputs: tuple[SinkOutput, ...] = ()
    watermarks: Mapping[str, int] = field(default_factory=dict)
    max_timestamps: Mapping[str, int | None] = field(default_factory=dict)
    restored: tuple[SubtaskRestored, ...] = ()
    lost: tuple[StateLost, ...] = ()
    # Every asynchronous upload record of this task's keyed subtasks, for the checkpoints
    # the driver still waits for.
    uploads: tuple[UploadStatus, ...] = ()
    # Background materializations (``checkpoint_id`` is the materialization's id).
    materializations: tuple[UploadStatus, ...] = ()
    operator_states: tuple[CarriedState, ...] = ()
    # Records in/out per operator and the user metrics' values (None: the task ran nothing).
    metrics: TaskMetricsReport | None = None
    # A source task's: its records' timestamps in aggregate (end-to-end latency metrics).
    record_times: SourceRecordTimes | None = None
