"""``SparkpointOptions``: the ``sparkpoint.*`` keys of the engine itself (no Flink counterpart)."""

from __future__ import annotations

from sparkpoint.config.option import (
    BOOLEAN,
    DURATION,
    STRING,
    ConfigOption,
    OptionGroup,
    duration_type,
    enum_type,
    int_type,
)

__all__ = ["SparkpointOptions"]


class SparkpointOptions(OptionGroup):
    """How the engine runs epochs on Spark and where executors keep working state.

    **Latency against throughput.** An exactly-once record is published when the
    checkpoint covering its epoch completes. A record's latency is the wait for the next
    epoch to start (with sparse input half of `sparkpoint.epoch.interval` on average, which
    is the checkpoint interval unless set), plus its epoch, plus the checkpoint's
    completion and commit (~0.02-0.04 s). The settings that move it (figures of
    `python -m bench.kafka_latency` at 1,000 records/s on 2 cores, exactly-once unless
    said; docs/benchmarks.md, runs of 2026-11-29): `sparkpoint.epoch.mode` (the epoch's own
    cost: one Spark job, ~0.34 s at a low rate, mostly the fixed cost of two stages of
    Python tasks, in the `job` mode: p50 0.85-0.87 s; ~0.07-0.09 s in `long-running`,
    which needs every task slot of the cluster: p50 0.60-0.65 s as the machine's load
    varies, and p99 1.9-2.3 s instead of 3.0-3.9 s at 80% of the maximum, 1.46 s with
    `sparkpoint.epoch.target-duration`; `auto` runs `long-running` while the job has its
    Spark application to itself, `job` otherwise);
    `sparkpoint.epoch.target-duration` (under steady heavy input, epochs about this long
    between checkpoints instead of one epoch per checkpoint interval, by default a quarter
    of the epoch interval: at 80% of the maximum in `long-running`, back-to-back epochs of
    ~0.3-0.5 s and p99 1.46-1.62 s in three runs against 1.90-2.34 s in four without it;
    a job whose epochs cost more than it in fixed cost alone, such as the
    `job` mode's Spark job per epoch, is left paced by the interval);
    `execution.checkpointing.interval` (the first term: 200 ms gave p50 0.20-0.22 s / p99
    0.39-0.47 s in `long-running`, at 3x the CPU of 1 s);
    `state.backend.changelog.enabled` (Flink's changelog: a checkpoint uploads what changed
    instead of the whole heap state, whose upload is on the checkpoint's path: p50 0.582
    and 0.588 s against 0.590 and 0.594 s in alternating probes of `long-running` with 1M
    keys, at up to 0.8x the CPU);
    `sparkpoint.epoch.interval` (epochs between checkpoints add epochs under exactly-once,
    each with its own transaction: 200 ms with 1 s checkpoints gave p50 0.64 s against
    0.62 s at 2.2x the CPU at 1,000 records/s in `long-running`, and p99 1.69 s against
    2.34 s at 80% of the maximum, where each epoch is shorter); `execution.buffer-timeout` (in
    `long-running`, the epoch interval of a job none of whose sinks waits for checkpoints:
    its default 100 ms gave `AT_LEAST_ONCE` p50 0.09 s at ~0.4 CPU s per 1,000 records);
    `sparkpoint.epoch.max-records-per-split` (bounds the epoch, hence the latency, under
    heavy input, at the price of throughput: each epoch pays the fixed cost);
    `sparkpoint.epoch.upload-wait` (a checkpoint whose uploads end within it completes with
    its own epoch instead of the next: a longer wait lowers the tail latency when uploads
    are slow, and slows epochs under heavy input); `sparkpoint.epoch.tasks-per-core` (more
    tasks balance large epochs; sparse source stages run one per core anyway; the
    `long-running` mode runs one task per slot).
    """

    TITLE = "sparkpoint engine"

    MAX_RECORDS_PER_SPLIT = ConfigOption(
        "sparkpoint.epoch.max-records-per-split",
        int_type(minimum=1),
        100_000,
        "Most records one source split reads in one epoch (one Spark job). A split with "
        "this many records waiting starts the next epoch at once (heavy input); it also "
        "bounds what a job buffers: a slow operator or sink slows the epochs, and the "
        "rest waits in the source (backpressure).",
    )
    EPOCH_INTERVAL: ConfigOption[int | None] = ConfigOption(
        "sparkpoint.epoch.interval",
        DURATION,
        None,
        "Time between the starts of two epochs while input is sparse (no split of a "
        "source that counts its records, such as Kafka's, has "
        "sparkpoint.epoch.max-records-per-split records waiting), on a fixed schedule as "
        "periodic checkpoints are (an epoch that starts late does not delay the next; one "
        "started early by heavy input or sparkpoint.epoch.target-duration starts the "
        "schedule anew). Unset: the checkpoint "
        "interval when checkpointing is on, else 1 s; in the long-running epoch mode, when "
        "no sink waits for checkpoints to publish, execution.buffer-timeout (100 ms). 0: an "
        "epoch starts as soon as any record is there.",
    )
    EPOCH_TARGET_DURATION: ConfigOption[int | None] = ConfigOption(
        "sparkpoint.epoch.target-duration",
        DURATION,
        None,
        "How long an epoch should take under steady input. When the records waiting would "
        "take longer to process (a fit of recent epochs' durations as a fixed cost plus a "
        "cost per record), the next epoch starts before sparkpoint.epoch.interval has "
        "passed, so that under heavy input the epoch carrying a checkpoint stays short "
        "and the checkpoint completes soon after it is due (lower tail latency, at the "
        "price of more epochs, hence more fixed costs and, under exactly-once, more "
        "transactions). An epoch whose fixed cost alone reaches it is not made smaller. "
        "Unset: a quarter of the epoch interval, at least 200 ms. 0: epochs are paced by "
        "the interval alone.",
    )
    IDLE_EPOCH_INTERVAL: ConfigOption[int | None] = ConfigOption(
        "sparkpoint.epoch.idle-interval",
        duration_type(10),
        None,
        "With no input, an empty epoch runs this often. Unset: every second when the job "
        "has operators that act on time (process functions, windows, async I/O, watermark "
        "strategies), else only when a due checkpoint has something to capture or complete, "
        "so an idle job runs no Spark job.",
    )
    UPLOAD_WAIT = ConfigOption(
        "sparkpoint.epoch.upload-wait",
        DURATION,
        500,
        "How long a keyed subtask waits at the end of an epoch carrying a checkpoint for its "
        "asynchronous snapshot upload before the task ends. An upload done by then is "
        "reported with its own epoch, so the checkpoint completes (and an exactly-once "
        "sink publishes) when that epoch ends instead of after the next one; a longer "
        "upload goes on in the background as without the wait. 0: never wait.",
    )
    TASKS_PER_CORE = ConfigOption(
        "sparkpoint.epoch.tasks-per-core",
        int_type(minimum=1),
        2,
        "Most Spark tasks a stage runs per executor core in one epoch. A stage with more "
        "subtasks runs several of them, one after the other, in one Spark task (each "
        "subtask keeps its own operators, state, timers and report; a keyed stage groups "
        "only subtasks placed on the same executor), so high parallelism does not cost one "
        "Spark task and one shuffle block per subtask. A source stage whose ranges together "
        "hold fewer than sparkpoint.epoch.max-records-per-split records runs one task per "
        "core: at a low rate each task is mostly fixed cost, and a second wave of tasks "
        "would wait for the first.",
    )
    EPOCH_MODE = ConfigOption(
        "sparkpoint.epoch.mode",
        enum_type("auto", "job", "long-running"),
        "auto",
        "How epochs run on Spark. job: one Spark job per epoch (every task launched, its "
        "closure shipped, rows shuffled through Spark, per epoch). long-running: one Spark "
        "job of long-lived tasks, one per task slot of every executor, runs epoch after "
        "epoch; the driver sends each task its orders and relays rows between them, so an "
        "epoch costs what its own work costs (lower latency at low rates; executors must "
        "reach the driver at spark.driver.host). It needs every "
        "task slot of the cluster while the job runs (another job in the same Spark "
        "application waits), and does not run stages with slot sharing group resources. "
        "A failed task or lost Python worker is retried by Spark and runs its unfinished "
        "task groups again; a lost executor relaunches the tasks and runs the epoch again; "
        "a task group that failed spark.task.maxFailures times in an epoch fails the job "
        "over. auto: long-running while the job is the only sparkpoint job of its Spark "
        "application, no other Spark job of the application is active, no stage has slot "
        "sharing group resources and no source or sink runs Spark jobs of its own; job "
        "otherwise (it gives the task slots back between epochs within a second of another "
        "job appearing, and takes them again 30 s after; a launch that cannot start every "
        "task within 15 s turns it to job for the rest of the job, with a warning).",
    )
    LOCAL_STATE_DIR: ConfigOption[str | None] = ConfigOption(
        "sparkpoint.local-state.dir",
        STRING,
        None,
        "Directory under which every executor keeps keyed working state in a directory of "
        "its own (sparkpoint-state/<application>/<executor>); unset: the executor's Spark "
        "local directory (SPARK_LOCAL_DIRS), which Spark removes with the executor.",
    )
    CHANGELOG_ENABLED = ConfigOption(
        "sparkpoint.state.changelog.enabled",
        BOOLEAN,
        True,
        "With checkpointing on, every keyed subtask stores what each epoch changed in its "
        "state next to the checkpoints (task-owned state, deleted once a checkpoint covers "
        "it), so a subtask whose executor or local state is lost restores alone: the "
        "latest checkpoint plus those changes. Off: such a loss rolls the whole job back.",
    )
