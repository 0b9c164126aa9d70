"""``CheckpointingOptions``: every ``execution.checkpointing.*`` key, its old keys and default.

Each option reads itself from a ``Mapping[str, str]`` (a ``Configuration`` or a dict of Flink
keys), trying the current key first and then the deprecated ones, as Flink's
``withDeprecatedKeys`` does. Durations are read as milliseconds, memory sizes as bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.config_parsing import parse_bool, parse_duration_ms, parse_memory_size

__all__ = ["CheckpointingOptions", "ConfigOption"]

_KINDS = ("duration", "int", "bool", "str", "memory", "enum")


@dataclass(frozen=True, slots=True)
class ConfigOption:
    """One configuration key: name, default (``None`` = no default), old names, value kind."""

    key: str
    default: Any
    deprecated_keys: tuple[str, ...] = ()
    description: str = ""
    kind: str = "str"

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"Unknown option kind {self.kind!r}; expected one of {_KINDS}")

    @property
    def all_keys(self) -> tuple[str, ...]:
        """The current key followed by the deprecated ones, in lookup order."""
        return (self.key, *self.deprecated_keys)

    def find_key(self, config: Mapping[str, Any]) -> str | None:
        """The first of ``all_keys`` set in ``config`` (``None`` if none is)."""
        for candidate in self.all_keys:
            if candidate in config and config[candidate] is not None:
                return candidate
        return None

    def is_set(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` sets this option under any of its keys."""
        return self.find_key(config) is not None

    def read(self, config: Mapping[str, Any]) -> Any:
        """The parsed value from ``config``, or the default when no key is set."""
        found = self.find_key(config)
        if found is None:
            return self.default
        return self.parse(config[found], key=found)

    def parse(self, raw: Any, *, key: str | None = None) -> Any:
        """Parse a raw (string) value of this option's kind."""
        key = key or self.key
        if self.kind == "duration":
            return parse_duration_ms(raw if isinstance(raw, int) else str(raw), key=key)
        if self.kind == "memory":
            return parse_memory_size(raw if isinstance(raw, int) else str(raw), key=key)
        if self.kind == "bool":
            return parse_bool(raw, key=key)
        if self.kind == "int":
            try:
                return int(str(raw).strip())
            except ValueError:
                raise ValueError(
                    f"Could not parse value {raw!r} for {key!r}: expected an integer"
                ) from None
        if self.kind == "enum":
            return str(raw).strip().upper().replace("-", "_")
        return str(raw)


class CheckpointingOptions:
    """The checkpointing keys of Flink 2.x with their 1.x (deprecated) spellings."""

    CHECKPOINTING_INTERVAL = ConfigOption(
        "execution.checkpointing.interval", None, (),
        "Interval of periodic checkpoints; unset disables checkpointing.", "duration",
    )
    CHECKPOINTING_CONSISTENCY_MODE = ConfigOption(
        "execution.checkpointing.mode", "EXACTLY_ONCE", (),
        "EXACTLY_ONCE or AT_LEAST_ONCE.", "enum",
    )
    CHECKPOINTING_TIMEOUT = ConfigOption(
        "execution.checkpointing.timeout", 600_000, (),
        "Time after which a checkpoint in progress is aborted.", "duration",
    )
    MIN_PAUSE_BETWEEN_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.min-pause", 0, (),
        "Minimal pause from the completion of one checkpoint to the start of the next.",
        "duration",
    )
    MAX_CONCURRENT_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.max-concurrent-checkpoints", 1, (),
        "Checkpoint attempts that may be in progress at the same time.", "int",
    )
    TOLERABLE_FAILURE_NUMBER = ConfigOption(
        "execution.checkpointing.tolerable-failed-checkpoints", 0, (),
        "Consecutive checkpoint failures tolerated before the job fails over.", "int",
    )
    MAX_RETAINED_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.num-retained", 1, ("state.checkpoints.num-retained",),
        "Number of completed checkpoints to retain.", "int",
    )
    EXTERNALIZED_CHECKPOINT_RETENTION = ConfigOption(
        "execution.checkpointing.externalized-checkpoint-retention",
        "NO_EXTERNALIZED_CHECKPOINTS", (),
        "DELETE_ON_CANCELLATION, RETAIN_ON_CANCELLATION or NO_EXTERNALIZED_CHECKPOINTS.", "enum",
    )
    ENABLE_UNALIGNED = ConfigOption(
        "execution.checkpointing.unaligned.enabled", False,
        ("execution.checkpointing.unaligned",),
        "Whether checkpoints are taken unaligned (EXACTLY_ONCE only).", "bool",
    )
    ALIGNED_CHECKPOINT_TIMEOUT = ConfigOption(
        "execution.checkpointing.aligned-checkpoint-timeout", 0,
        ("execution.checkpointing.alignment-timeout",),
        "Alignment time after which an aligned checkpoint switches to unaligned.", "duration",
    )
    FORCE_UNALIGNED = ConfigOption(
        "execution.checkpointing.unaligned.forced", False, (),
        "Force unaligned checkpoints despite non-checkpointable partitioners.", "bool",
    )
    CHECKPOINTS_DIRECTORY = ConfigOption(
        "execution.checkpointing.dir", None, ("state.checkpoints.dir",),
        "Directory for checkpoint data and metadata.", "str",
    )
    SAVEPOINT_DIRECTORY = ConfigOption(
        "execution.checkpointing.savepoint-dir", None, ("state.savepoints.dir",),
        "Default directory for savepoints.", "str",
    )
    FS_SMALL_FILE_THRESHOLD = ConfigOption(
        "execution.checkpointing.data-inline-threshold", 20 * 1024,
        ("state.storage.fs.memory-threshold", "state.backend.fs.memory-threshold"),
        "State at or below this size is stored inline in the metadata (at most 1 MiB).",
        "memory",
    )
    FS_WRITE_BUFFER_SIZE = ConfigOption(
        "execution.checkpointing.write-buffer-size", 4 * 1024,
        ("state.storage.fs.write-buffer-size", "state.backend.fs.write-buffer-size"),
        "Write buffer size of checkpoint streams.", "memory",
    )
    CREATE_CHECKPOINT_SUB_DIR = ConfigOption(
        "execution.checkpointing.create-subdir", True, ("state.checkpoints.create-subdir",),
        "Whether checkpoints go into a <job-id> subdirectory of the checkpoint dir.", "bool",
    )
    INCREMENTAL_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.incremental", False, ("state.backend.incremental",),
        "Whether the state backend takes incremental checkpoints where it can.", "bool",
    )
    CHECKPOINT_STORAGE = ConfigOption(
        "execution.checkpointing.storage", None, ("state.checkpoint-storage",),
        "'jobmanager', 'filesystem' or a factory name.", "str",
    )
    ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH = ConfigOption(
        "execution.checkpointing.checkpoints-after-tasks-finish", True,
        ("execution.checkpointing.checkpoints-after-tasks-finish.enabled",),
        "Whether checkpoints continue after some tasks have finished.", "bool",
    )
    CHECKPOINTING_INTERVAL_DURING_BACKLOG = ConfigOption(
        "execution.checkpointing.interval-during-backlog", None, (),
        "Checkpoint interval while a source reports backlog (0 disables; >= interval).",
        "duration",
    )
    CLEANER_PARALLEL_MODE = ConfigOption(
        "execution.checkpointing.cleaner.parallel-mode", True,
        ("state.checkpoint.cleaner.parallel-mode",),
        "Whether checkpoint state is discarded in parallel.", "bool",
    )
    LOCAL_BACKUP_ENABLED = ConfigOption(
        "execution.checkpointing.local-backup.enabled", False, ("state.backend.local-recovery",),
        "Whether task-local copies of state are kept for local recovery.", "bool",
    )
    APPROXIMATE_LOCAL_RECOVERY = ConfigOption(
        "execution.state-recovery.approximate-local-recovery", False,
        ("execution.checkpointing.approximate-local-recovery",),
        "Approximate local recovery (may lose data; restarts only failed tasks).", "bool",
    )
    CHECKPOINT_ID_OF_IGNORED_IN_FLIGHT_DATA = ConfigOption(
        "execution.state-recovery.without-channel-state.checkpoint-id", -1,
        ("execution.checkpointing.recover-without-channel-state.checkpoint-id",),
        "Checkpoint id whose in-flight data is ignored on recovery (-1 = none).", "int",
    )

    @classmethod
    def all_options(cls) -> tuple[ConfigOption, ...]:
        """Every option declared here, in declaration order."""
        return tuple(v for v in vars(cls).values() if isinstance(v, ConfigOption))
