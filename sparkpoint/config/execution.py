"""Job-wide options: parallelism, the pipeline, the runtime mode, where state is restored from."""

from __future__ import annotations

from sparkpoint.config.option import (
    BOOLEAN,
    DURATION,
    LIST,
    MAP,
    PATH,
    ConfigOption,
    OptionGroup,
    enum_type,
    int_type,
)

__all__ = ["CoreOptions", "ExecutionOptions", "PipelineOptions", "StateRecoveryOptions"]


class CoreOptions(OptionGroup):
    """Flink's core options that sparkpoint reads."""

    TITLE = "Parallelism"

    DEFAULT_PARALLELISM: ConfigOption[int | None] = ConfigOption(
        "parallelism.default",
        int_type(minimum=1),
        None,
        "Parallelism of operators; unset: Spark's default parallelism (local: one per core).",
    )


class PipelineOptions(OptionGroup):
    """Options of the dataflow and its ``ExecutionConfig``."""

    TITLE = "Pipeline"

    MAX_PARALLELISM: ConfigOption[int | None] = ConfigOption(
        "pipeline.max-parallelism",
        int_type(1, 32767),
        None,
        "Number of key groups (upper limit of rescaling); unset: derived from the "
        "parallelism, or adopted from the restored snapshot.",
    )
    AUTO_WATERMARK_INTERVAL = ConfigOption(
        "pipeline.auto-watermark-interval",
        DURATION,
        200,
        "Interval of periodic watermarks (ExecutionConfig.get_auto_watermark_interval). "
        "Watermarks advance once per epoch (the epoch is the period); under IngestionTime "
        "the watermark is processing time aligned down to a multiple of this interval. 0 "
        "turns periodic watermarks off, as in Flink: event time stays at its minimum until "
        "a source split ends (then its watermark is the maximum).",
    )
    OPERATOR_CHAINING = ConfigOption(
        "pipeline.operator-chaining.enabled",
        BOOLEAN,
        True,
        "Whether operators are chained (is_chaining_enabled). No counterpart: a stage's "
        "operators run in one Python task over record batches; unchaining would only add "
        "Spark stages, never change results.",
        ("pipeline.operator-chaining",),
    )
    GLOBAL_JOB_PARAMETERS: ConfigOption[dict[str, str] | None] = ConfigOption(
        "pipeline.global-job-parameters",
        MAP,
        None,
        "Parameters every function can read (ExecutionConfig.get_global_job_parameters).",
    )
    REGISTERED_KRYO_TYPES: ConfigOption[list[str] | None] = ConfigOption(
        "pipeline.registered-kryo-types",
        LIST,
        None,
        "Type names registered as with ExecutionConfig.register_kryo_type. No counterpart: "
        "records are Python objects, pickled (or Arrow) between stages; Kryo is Java's.",
    )
    REGISTERED_POJO_TYPES: ConfigOption[list[str] | None] = ConfigOption(
        "pipeline.registered-pojo-types",
        LIST,
        None,
        "Type names registered as with ExecutionConfig.register_pojo_type. No counterpart: "
        "there are no Java POJOs in a Python job.",
    )


class ExecutionOptions(OptionGroup):
    """How the job executes."""

    TITLE = "Execution"

    RUNTIME_MODE = ConfigOption(
        "execution.runtime-mode",
        enum_type("STREAMING", "BATCH", "AUTOMATIC"),
        "STREAMING",
        "STREAMING emits every update; BATCH emits only final results of keyed aggregations; "
        "AUTOMATIC runs as STREAMING.",
    )
    BUFFER_TIMEOUT = ConfigOption(
        "execution.buffer-timeout",
        DURATION,
        100,
        "Most time output buffers wait before they are flushed (get_buffer_timeout). Records "
        "move between stages once per epoch: with sparkpoint.epoch.mode=long-running and no "
        "sink that waits for checkpoints to publish (at-least-once or non-transactional "
        "sinks, or checkpoints off or AT_LEAST_ONCE), an epoch starts at most this often "
        "under sparse input unless sparkpoint.epoch.interval is set; otherwise no "
        "counterpart (sparkpoint.epoch.max-records-per-split bounds an epoch).",
    )


class StateRecoveryOptions(OptionGroup):
    """Where a job's state is restored from, and how."""

    TITLE = "State recovery"

    SAVEPOINT_PATH: ConfigOption[str | None] = ConfigOption(
        "execution.state-recovery.path",
        PATH,
        None,
        "Checkpoint or savepoint (its directory or `_metadata` file) to start the job from.",
        ("execution.savepoint.path",),
    )
    CLAIM_MODE = ConfigOption(
        "execution.state-recovery.claim-mode",
        enum_type("CLAIM", "NO_CLAIM", "LEGACY"),
        "NO_CLAIM",
        "Who owns the snapshot the job starts from. NO_CLAIM: the job never deletes it. "
        "CLAIM: the job owns it and deletes it once subsumed. LEGACY (deprecated): as "
        "NO_CLAIM. In every mode the first checkpoint after the restore is a full one, so it "
        "uses no file of the snapshot.",
        ("execution.savepoint-restore-mode",),
    )
    SAVEPOINT_IGNORE_UNCLAIMED_STATE = ConfigOption(
        "execution.state-recovery.ignore-unclaimed-state",
        BOOLEAN,
        False,
        "Allow restoring when the snapshot holds state of operators the program lacks.",
        ("execution.savepoint.ignore-unclaimed-state",),
    )
    APPROXIMATE_LOCAL_RECOVERY = ConfigOption(
        "execution.state-recovery.approximate-local-recovery",
        BOOLEAN,
        False,
        "Approximate local recovery (restart only failed tasks; may lose data). Recorded only.",
        ("execution.checkpointing.approximate-local-recovery",),
    )
    CHECKPOINT_ID_OF_IGNORED_IN_FLIGHT_DATA = ConfigOption(
        "execution.state-recovery.without-channel-state.checkpoint-id",
        int_type(minimum=-1),
        -1,
        "Checkpoint whose in-flight data is ignored on recovery (-1: none). Recorded only.",
        ("execution.checkpointing.recover-without-channel-state.checkpoint-id",),
    )
