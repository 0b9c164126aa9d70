"""``SparkpointOptions``: the ``sparkpoint.*`` keys of the engine itself (no Flink counterpart)."""

from __future__ import annotations

from sparkpoint.config.option import BOOLEAN, STRING, ConfigOption, OptionGroup, int_type

__all__ = ["SparkpointOptions"]


class SparkpointOptions(OptionGroup):
    """How the engine runs epochs on Spark and where executors keep working state."""

    TITLE = "sparkpoint engine"

    MAX_RECORDS_PER_SPLIT = ConfigOption(
        "sparkpoint.epoch.max-records-per-split",
        int_type(minimum=1),
        100_000,
        "Most records one source split reads in one epoch (one Spark job).",
    )
    TASKS_PER_CORE = ConfigOption(
        "sparkpoint.epoch.tasks-per-core",
        int_type(minimum=1),
        2,
        "Most Spark tasks a stage runs per executor core in one epoch. A stage with more "
        "subtasks runs several of them, one after the other, in one Spark task (each "
        "subtask keeps its own operators, state, timers and report; a keyed stage groups "
        "only subtasks placed on the same executor), so high parallelism does not cost one "
        "Spark task and one shuffle block per subtask.",
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
