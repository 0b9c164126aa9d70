"""``CheckpointingOptions``: the ``execution.checkpointing.*`` keys with their 1.x spellings."""

from __future__ import annotations

from sparkpoint.config.option import (
    BOOLEAN,
    DURATION,
    MEMORY_SIZE,
    PATH,
    ConfigOption,
    OptionGroup,
    duration_type,
    enum_type,
    int_type,
)

__all__ = ["CheckpointingOptions"]

_NO_EFFECT = " Accepted; no effect in sparkpoint (epochs are aligned by construction)."


class CheckpointingOptions(OptionGroup):
    """The checkpointing keys of Flink 2.x, with their 1.x (deprecated) spellings."""

    TITLE = "Checkpointing"

    CHECKPOINTING_INTERVAL: ConfigOption[int | None] = ConfigOption(
        "execution.checkpointing.interval",
        duration_type(10),
        None,
        "Interval of periodic checkpoints (at least 10 ms); unset disables checkpointing.",
    )
    CHECKPOINTING_CONSISTENCY_MODE = ConfigOption(
        "execution.checkpointing.mode",
        enum_type("EXACTLY_ONCE", "AT_LEAST_ONCE"),
        "EXACTLY_ONCE",
        "Consistency guarantee. AT_LEAST_ONCE: transactional sinks publish each epoch's output "
        "when the epoch ends instead of when a checkpoint covering it completes (lower "
        "latency; after a failover the output since the last checkpoint is published again). "
        "State is exactly-once in both modes (epochs are barriers).",
    )
    CHECKPOINTING_TIMEOUT = ConfigOption(
        "execution.checkpointing.timeout",
        DURATION,
        600_000,
        "Time after which a checkpoint in progress is aborted (checked when its epoch ends).",
    )
    MIN_PAUSE_BETWEEN_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.min-pause",
        DURATION,
        0,
        "Minimal pause from the completion of one checkpoint to the start of the next.",
    )
    MAX_CONCURRENT_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.max-concurrent-checkpoints",
        int_type(minimum=1),
        1,
        "Checkpoint attempts that may be in progress at the same time.",
    )
    TOLERABLE_FAILURE_NUMBER = ConfigOption(
        "execution.checkpointing.tolerable-failed-checkpoints",
        int_type(minimum=0),
        0,
        "Consecutive checkpoint failures tolerated before the job fails over.",
    )
    MAX_RETAINED_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.num-retained",
        int_type(minimum=1),
        1,
        "Number of completed checkpoints retained.",
        ("state.checkpoints.num-retained",),
    )
    EXTERNALIZED_CHECKPOINT_RETENTION = ConfigOption(
        "execution.checkpointing.externalized-checkpoint-retention",
        enum_type(
            "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION", "NO_EXTERNALIZED_CHECKPOINTS"
        ),
        "NO_EXTERNALIZED_CHECKPOINTS",
        "Which retained checkpoints outlive the job when it is cancelled or fails.",
    )
    ENABLE_UNALIGNED = ConfigOption(
        "execution.checkpointing.unaligned.enabled",
        BOOLEAN,
        False,
        "Whether checkpoints are taken unaligned (EXACTLY_ONCE and one concurrent checkpoint "
        "only)." + _NO_EFFECT,
        ("execution.checkpointing.unaligned",),
    )
    ALIGNED_CHECKPOINT_TIMEOUT = ConfigOption(
        "execution.checkpointing.aligned-checkpoint-timeout",
        DURATION,
        0,
        "Alignment time after which an aligned checkpoint switches to unaligned." + _NO_EFFECT,
        ("execution.checkpointing.alignment-timeout",),
    )
    FORCE_UNALIGNED = ConfigOption(
        "execution.checkpointing.unaligned.forced",
        BOOLEAN,
        False,
        "Force unaligned checkpoints despite non-checkpointable partitioners." + _NO_EFFECT,
    )
    CHECKPOINTS_DIRECTORY: ConfigOption[str | None] = ConfigOption(
        "execution.checkpointing.dir",
        PATH,
        None,
        "Directory (path or URI) for checkpoint data and metadata; its scheme must be known.",
        ("state.checkpoints.dir",),
    )
    SAVEPOINT_DIRECTORY: ConfigOption[str | None] = ConfigOption(
        "execution.checkpointing.savepoint-dir",
        PATH,
        None,
        "Default directory for savepoints.",
        ("state.savepoints.dir",),
    )
    FS_SMALL_FILE_THRESHOLD = ConfigOption(
        "execution.checkpointing.data-inline-threshold",
        MEMORY_SIZE,
        20 * 1024,
        "State up to this size is stored inline in `_metadata`, not in a file (at most 1 mb; "
        "a larger value warns and the default is used).",
        ("state.storage.fs.memory-threshold", "state.backend.fs.memory-threshold"),
    )
    FS_WRITE_BUFFER_SIZE = ConfigOption(
        "execution.checkpointing.write-buffer-size",
        MEMORY_SIZE,
        4 * 1024,
        "Write buffer of checkpoint streams; the buffer used is at least the inline threshold.",
        ("state.storage.fs.write-buffer-size", "state.backend.fs.write-buffer-size"),
    )
    CREATE_CHECKPOINT_SUB_DIR = ConfigOption(
        "execution.checkpointing.create-subdir",
        BOOLEAN,
        True,
        "Whether checkpoints go into a subdirectory named after the job id.",
        ("state.checkpoints.create-subdir",),
    )
    INCREMENTAL_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.incremental",
        BOOLEAN,
        False,
        "Whether RocksDB takes incremental checkpoints (uploads only new SST files).",
        ("state.backend.incremental",),
    )
    CHECKPOINT_STORAGE: ConfigOption[str | None] = ConfigOption(
        "execution.checkpointing.storage",
        enum_type("jobmanager", "filesystem"),
        None,
        "Checkpoint storage; unset: filesystem when a checkpoint directory is set, else "
        "jobmanager.",
        ("state.checkpoint-storage",),
    )
    ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH = ConfigOption(
        "execution.checkpointing.checkpoints-after-tasks-finish",
        BOOLEAN,
        True,
        "Whether checkpoints continue after some tasks have finished.",
        ("execution.checkpointing.checkpoints-after-tasks-finish.enabled",),
    )
    CHECKPOINTING_INTERVAL_DURING_BACKLOG: ConfigOption[int | None] = ConfigOption(
        "execution.checkpointing.interval-during-backlog",
        duration_type(10, or_zero=True),
        None,
        "Checkpoint interval while a source reports backlog (0 disables; >= the interval). "
        "Accepted; sources report no backlog yet.",
    )
    CLEANER_PARALLEL_MODE = ConfigOption(
        "execution.checkpointing.cleaner.parallel-mode",
        BOOLEAN,
        True,
        "Whether checkpoint state is discarded in parallel. Accepted; sparkpoint always "
        "discards in parallel.",
        ("state.checkpoint.cleaner.parallel-mode",),
    )
    LOCAL_BACKUP_ENABLED = ConfigOption(
        "execution.checkpointing.local-backup.enabled",
        BOOLEAN,
        False,
        "Whether task-local copies of state are kept for local recovery. Accepted; no "
        "effect (a job whose local state is lost restores from the checkpoint).",
        ("state.backend.local-recovery",),
    )
    PREFER_CHECKPOINT_FOR_RECOVERY = ConfigOption(
        "execution.checkpointing.prefer-checkpoint-for-recovery",
        BOOLEAN,
        False,
        "Recover from the latest checkpoint even when a savepoint is newer (removed in Flink "
        "1.14; honoured with a warning).",
    )
