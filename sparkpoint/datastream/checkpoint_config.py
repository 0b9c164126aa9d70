"""``CheckpointConfig``: every checkpointing setting, with PyFlink 1.x and Flink 2.x spellings.

``CheckpointConfig()`` holds the defaults. Setters validate like Flink's (``ValueError`` with
the value and the rule) and return the config so calls chain as in PyFlink 2.x. Durations
are accepted as ``Duration``, ``Time``, ``timedelta`` or int milliseconds; getters return
milliseconds where PyFlink does and ``Duration`` for the alignment timeout.
"""

from __future__ import annotations

import datetime
import logging
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sparkpoint.common.time import Duration, Time, to_millis
from sparkpoint.config import CheckpointingOptions as Opt
from sparkpoint.config import ConfigOption, apply_options, parse_bool
from sparkpoint.config import StateRecoveryOptions as Recovery
from sparkpoint.datastream.checkpointing_mode import CheckpointingMode
from sparkpoint.datastream.externalized_checkpoint_retention import (
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
)
from sparkpoint.errors import ConfigurationError

if TYPE_CHECKING:
    from sparkpoint.checkpoint.storage import CheckpointStorage

__all__ = ["CheckpointConfig", "ExternalizedCheckpointCleanup"]

_LOG = logging.getLogger(__name__)

MINIMAL_CHECKPOINT_TIME = 10
"""The smallest checkpoint interval and timeout Flink accepts, in milliseconds."""

UNLIMITED_TOLERABLE_FAILURE_NUMBER = 2**31 - 1
"""Tolerable failures meaning "never fail the job because of checkpoint failures"."""

_PREFER_CHECKPOINT_WARNED = False

_Millis = int | Duration | Time | datetime.timedelta


class CheckpointConfig:
    """Configuration that captures all checkpointing related settings.

    :data:`DEFAULT_MODE`: exactly once. :data:`DEFAULT_TIMEOUT`: 10 minutes.
    :data:`DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS`: none.
    :data:`DEFAULT_MAX_CONCURRENT_CHECKPOINTS`: one.
    """

    DEFAULT_MODE = CheckpointingMode[Opt.CHECKPOINTING_CONSISTENCY_MODE.default]
    DEFAULT_TIMEOUT = Opt.CHECKPOINTING_TIMEOUT.default
    DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS = Opt.MIN_PAUSE_BETWEEN_CHECKPOINTS.default
    DEFAULT_MAX_CONCURRENT_CHECKPOINTS = Opt.MAX_CONCURRENT_CHECKPOINTS.default
    DEFAULT_TOLERABLE_CHECKPOINT_FAILURE_NUMBER = Opt.TOLERABLE_FAILURE_NUMBER.default
    DEFAULT_NUM_RETAINED_CHECKPOINTS = Opt.MAX_RETAINED_CHECKPOINTS.default
    DEFAULT_CHECKPOINT_ID_OF_IGNORED_IN_FLIGHT_DATA = (
        Recovery.CHECKPOINT_ID_OF_IGNORED_IN_FLIGHT_DATA.default
    )
    MINIMAL_CHECKPOINT_TIME = MINIMAL_CHECKPOINT_TIME
    UNLIMITED_TOLERABLE_FAILURE_NUMBER = UNLIMITED_TOLERABLE_FAILURE_NUMBER

    def __init__(self, configuration: Mapping[str, Any] | None = None) -> None:
        self._interval = -1
        self._mode = self.DEFAULT_MODE
        self._timeout = self.DEFAULT_TIMEOUT
        self._min_pause = self.DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS
        self._max_concurrent = self.DEFAULT_MAX_CONCURRENT_CHECKPOINTS
        self._tolerable = self.DEFAULT_TOLERABLE_CHECKPOINT_FAILURE_NUMBER
        # None until configured: the 1.x getter then returns None, as the seed says.
        self._retention: ExternalizedCheckpointRetention | None = None
        self._unaligned = Opt.ENABLE_UNALIGNED.default
        self._aligned_timeout = Opt.ALIGNED_CHECKPOINT_TIMEOUT.default
        self._force_unaligned = Opt.FORCE_UNALIGNED.default
        self._storage: CheckpointStorage | None = None
        self._num_retained = self.DEFAULT_NUM_RETAINED_CHECKPOINTS
        self._prefer_checkpoint_for_recovery = Opt.PREFER_CHECKPOINT_FOR_RECOVERY.default
        self._approximate_local_recovery = Recovery.APPROXIMATE_LOCAL_RECOVERY.default
        self._ignored_in_flight_checkpoint_id = self.DEFAULT_CHECKPOINT_ID_OF_IGNORED_IN_FLIGHT_DATA
        self._after_tasks_finish = Opt.ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH.default
        self._interval_during_backlog = Opt.CHECKPOINTING_INTERVAL_DURING_BACKLOG.default
        if configuration is not None:
            self.configure(configuration)

    # ---- enabling, interval, mode ------------------------------------------------------

    def is_checkpointing_enabled(self) -> bool:
        """Whether periodic checkpoints are enabled (an interval is set)."""
        return self._interval > 0

    def get_checkpoint_interval(self) -> int:
        """The base interval of periodic checkpoints in milliseconds (-1: disabled)."""
        return self._interval

    def set_checkpoint_interval(self, checkpoint_interval: _Millis) -> CheckpointConfig:
        """Set the base interval of periodic checkpoints (ms or a Duration); >= 10 ms."""
        millis = to_millis(checkpoint_interval, what="checkpoint_interval")
        if millis < MINIMAL_CHECKPOINT_TIME:
            raise ValueError(
                f"Checkpoint interval must be larger than or equal to {MINIMAL_CHECKPOINT_TIME} "
                f"ms, got {millis} ms"
            )
        self._check_backlog_interval(self._interval_during_backlog, millis)
        self._interval = millis
        return self

    def get_checkpoint_interval_during_backlog(self) -> int:
        """The interval while sources report backlog, in ms (-1: same as the interval)."""
        return -1 if self._interval_during_backlog is None else self._interval_during_backlog

    def set_checkpoint_interval_during_backlog(self, interval: _Millis) -> CheckpointConfig:
        """Set the interval while sources report backlog (0 disables checkpoints then)."""
        millis = to_millis(interval, what="interval during backlog")
        if millis != 0 and millis < MINIMAL_CHECKPOINT_TIME:
            raise ValueError(
                "Checkpoint interval during backlog must be zero or larger than or equal to "
                f"{MINIMAL_CHECKPOINT_TIME} ms, got {millis} ms"
            )
        self._check_backlog_interval(millis, self._interval)
        self._interval_during_backlog = millis
        return self

    @staticmethod
    def _check_backlog_interval(backlog: int | None, interval: int) -> None:
        if backlog not in (None, 0) and interval > 0 and backlog < interval:
            raise ValueError(
                f"Checkpoint interval during backlog ({backlog} ms) must be 0 or at least the "
                f"checkpoint interval ({interval} ms)"
            )

    def get_checkpointing_mode(self) -> CheckpointingMode:
        """Exactly-once or at-least-once."""
        return self._mode

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode) -> CheckpointConfig:
        """Set the mode; AT_LEAST_ONCE is refused while unaligned checkpoints are enabled."""
        mode = CheckpointingMode.of(checkpointing_mode)
        _check_unaligned(self._unaligned, mode, self._max_concurrent)
        self._mode = mode
        return self

    def get_checkpointing_consistency_mode(self) -> CheckpointingMode:
        """Flink 2.x name of :meth:`get_checkpointing_mode`."""
        return self.get_checkpointing_mode()

    def set_checkpointing_consistency_mode(self, mode: CheckpointingMode) -> CheckpointConfig:
        """Flink 2.x name of :meth:`set_checkpointing_mode`."""
        return self.set_checkpointing_mode(mode)

    # ---- timing and concurrency --------------------------------------------------------

    def get_checkpoint_timeout(self) -> int:
        """The time after which a checkpoint in progress is aborted, in milliseconds."""
        return self._timeout

    def set_checkpoint_timeout(self, checkpoint_timeout: _Millis) -> CheckpointConfig:
        """Set the checkpoint timeout (ms or a Duration); >= 10 ms."""
        millis = to_millis(checkpoint_timeout, what="checkpoint_timeout")
        if millis < MINIMAL_CHECKPOINT_TIME:
            raise ValueError(
                f"Checkpoint timeout must be larger than or equal to {MINIMAL_CHECKPOINT_TIME} "
                f"ms, got {millis} ms"
            )
        self._timeout = millis
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        """Minimal pause from the completion of one checkpoint to the next trigger, in ms."""
        return self._min_pause

    def set_min_pause_between_checkpoints(
        self, min_pause_between_checkpoints: _Millis
    ) -> CheckpointConfig:
        """Set the minimal pause between checkpoints (ms or a Duration); >= 0."""
        millis = to_millis(min_pause_between_checkpoints, what="min_pause_between_checkpoints")
        if millis < 0:
            raise ValueError(f"Pause value must be zero or positive, got {millis} ms")
        self._min_pause = millis
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        """How many checkpoint attempts may be in progress at the same time."""
        return self._max_concurrent

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> CheckpointConfig:
        """Set the number of concurrent checkpoint attempts; >= 1 (1 with unaligned)."""
        value = _as_int(max_concurrent_checkpoints, "max_concurrent_checkpoints")
        if value < 1:
            raise ValueError(
                f"The maximum number of concurrent attempts must be at least one, got {value}."
            )
        _check_unaligned(self._unaligned, self._mode, value)
        self._max_concurrent = value
        return self

    # ---- failures ----------------------------------------------------------------------

    def is_fail_on_checkpointing_errors(self) -> bool:
        """Whether the job fails on the first checkpoint failure (tolerable number is 0)."""
        return self._tolerable == 0

    def set_fail_on_checkpointing_errors(
        self, fail_on_checkpointing_errors: bool
    ) -> CheckpointConfig:
        """True: tolerate no checkpoint failure (0); False: tolerate any (2147483647)."""
        unlimited = UNLIMITED_TOLERABLE_FAILURE_NUMBER
        fail = parse_bool(fail_on_checkpointing_errors, "fail_on_checkpointing_errors")
        self._tolerable = 0 if fail else unlimited
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        """Consecutive checkpoint failures tolerated before the job fails over."""
        return self._tolerable

    def set_tolerable_checkpoint_failure_number(
        self, tolerable_checkpoint_failure_number: int
    ) -> CheckpointConfig:
        """Set the consecutive checkpoint failures tolerated (0 = fail on the first)."""
        value = _as_int(tolerable_checkpoint_failure_number, "tolerable_checkpoint_failure_number")
        if value < 0:
            raise ValueError(
                f"The tolerable failure checkpoint number must be non-negative, got {value}."
            )
        self._tolerable = value
        return self

    # ---- externalized retention --------------------------------------------------------

    def enable_externalized_checkpoints(
        self, cleanup_mode: ExternalizedCheckpointCleanup | ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """Deprecated (1.15) name of :meth:`set_externalized_checkpoint_cleanup`."""
        return self.set_externalized_checkpoint_cleanup(cleanup_mode)

    def set_externalized_checkpoint_cleanup(
        self, cleanup_mode: ExternalizedCheckpointCleanup | ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """Set what happens to retained checkpoints when the job is cancelled or fails."""
        return self.set_externalized_checkpoint_retention(cleanup_mode)

    def get_externalized_checkpoint_cleanup(self) -> ExternalizedCheckpointCleanup | None:
        """The retention policy as the 1.x ``ExternalizedCheckpointCleanup`` enum, or ``None``
        if none is configured."""
        if self._retention is None:
            return None
        return ExternalizedCheckpointCleanup[self._retention.name]

    def set_externalized_checkpoint_retention(
        self, retention_mode: ExternalizedCheckpointRetention | ExternalizedCheckpointCleanup
    ) -> CheckpointConfig:
        """Set the retention; externalized unless NO_EXTERNALIZED_CHECKPOINTS."""
        member = ExternalizedCheckpointRetention.of(retention_mode)
        assert isinstance(member, ExternalizedCheckpointRetention)
        self._retention = member
        return self

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        """The retention policy (default NO_EXTERNALIZED_CHECKPOINTS)."""
        if self._retention is None:
            return ExternalizedCheckpointRetention[Opt.EXTERNALIZED_CHECKPOINT_RETENTION.default]
        return self._retention

    def is_externalized_checkpoints_enabled(self) -> bool:
        """Whether checkpoints outlive the job in some terminal state."""
        retention = self.get_externalized_checkpoint_retention()
        return retention is not ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS

    def get_num_retained_checkpoints(self) -> int:
        """Completed checkpoints retained (``execution.checkpointing.num-retained``)."""
        return self._num_retained

    def set_num_retained_checkpoints(self, num_retained: int) -> CheckpointConfig:
        """Set how many completed checkpoints are retained; >= 1."""
        value = _as_int(num_retained, "num_retained")
        if value < 1:
            raise ValueError(
                f"execution.checkpointing.num-retained must be at least 1, got {value}"
            )
        self._num_retained = value
        return self

    # ---- unaligned checkpoints ---------------------------------------------------------

    def is_unaligned_checkpoints_enabled(self) -> bool:
        """Whether unaligned checkpoints are enabled."""
        return self._unaligned

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        """Enable (or disable) unaligned checkpoints; EXACTLY_ONCE and one concurrent only."""
        enabled = parse_bool(enabled, "enabled")
        _check_unaligned(enabled, self._mode, self._max_concurrent)
        self._unaligned = enabled
        return self

    def set_unaligned_checkpoints_enabled(self, enabled: bool) -> CheckpointConfig:
        """Same as :meth:`enable_unaligned_checkpoints`."""
        return self.enable_unaligned_checkpoints(enabled)

    def disable_unaligned_checkpoints(self) -> CheckpointConfig:
        """Disable unaligned checkpoints."""
        return self.enable_unaligned_checkpoints(False)

    def set_aligned_checkpoint_timeout(self, alignment_timeout: _Millis) -> CheckpointConfig:
        """Alignment time after which an aligned checkpoint switches to unaligned (0: start
        unaligned). Only relevant with unaligned checkpoints enabled."""
        millis = to_millis(alignment_timeout, what="alignment_timeout")
        if millis < 0:
            raise ValueError(f"The aligned checkpoint timeout must not be negative, got {millis}")
        self._aligned_timeout = millis
        return self

    def get_aligned_checkpoint_timeout(self) -> Duration:
        """The aligned checkpoint timeout."""
        return Duration.of_millis(self._aligned_timeout)

    def set_alignment_timeout(self, alignment_timeout: _Millis) -> CheckpointConfig:
        """Deprecated (2.0) name of :meth:`set_aligned_checkpoint_timeout`."""
        return self.set_aligned_checkpoint_timeout(alignment_timeout)

    def get_alignment_timeout(self) -> Duration:
        """Deprecated (2.0) name of :meth:`get_aligned_checkpoint_timeout`."""
        return self.get_aligned_checkpoint_timeout()

    def set_force_unaligned_checkpoints(
        self, force_unaligned_checkpoints: bool = True
    ) -> CheckpointConfig:
        """Force unaligned checkpoints despite non-checkpointable partitioners."""
        self._force_unaligned = parse_bool(
            force_unaligned_checkpoints, "force_unaligned_checkpoints"
        )
        return self

    def is_force_unaligned_checkpoints(self) -> bool:
        """Whether unaligned checkpoints are forced."""
        return self._force_unaligned

    # ---- storage -----------------------------------------------------------------------

    def set_checkpoint_storage(self, storage: CheckpointStorage) -> CheckpointConfig:
        """Set where checkpoints are stored (a ``CheckpointStorage``)."""
        from sparkpoint.checkpoint.storage import CheckpointStorage as _Base

        if not isinstance(storage, _Base):
            raise TypeError(
                f"set_checkpoint_storage expects a CheckpointStorage (JobManagerCheckpointStorage, "
                f"FileSystemCheckpointStorage, CustomCheckpointStorage), got {storage!r}; use "
                "set_checkpoint_storage_dir for a path"
            )
        self._storage = storage
        return self

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> CheckpointConfig:
        """Store checkpoints as files under ``checkpoint_path`` (FileSystemCheckpointStorage)."""
        from sparkpoint.datastream.checkpoint_storage import FileSystemCheckpointStorage

        if not isinstance(checkpoint_path, str) or not checkpoint_path:
            raise ValueError(f"checkpoint_path must be a non-empty path, got {checkpoint_path!r}")
        self._storage = FileSystemCheckpointStorage(checkpoint_path)
        return self

    def get_checkpoint_storage(self) -> CheckpointStorage | None:
        """The configured checkpoint storage (``None`` if none was set)."""
        return self._storage

    # ---- recovery ----------------------------------------------------------------------

    def is_prefer_checkpoint_for_recovery(self) -> bool:
        """Whether recovery falls back to the latest checkpoint when a savepoint is newer."""
        return self._prefer_checkpoint_for_recovery

    def set_prefer_checkpoint_for_recovery(
        self, prefer_checkpoint_for_recovery: bool
    ) -> CheckpointConfig:
        """Recover from the latest checkpoint even when a savepoint is more recent.

        Flink deprecated this in 1.12 and removed it in 1.14; sparkpoint honours it and warns
        once per process, because it can lead to data loss and duplicate outputs.
        """
        global _PREFER_CHECKPOINT_WARNED
        if prefer_checkpoint_for_recovery and not _PREFER_CHECKPOINT_WARNED:
            _PREFER_CHECKPOINT_WARNED = True
            warnings.warn(
                "set_prefer_checkpoint_for_recovery(True) can lead to data loss and duplicate "
                "outputs: recovery will use the latest checkpoint even when a savepoint is more "
                "recent, undoing what happened after it (and re-running side effects). Flink "
                "deprecated this option in 1.12 and removed it in 1.14; sparkpoint still honours "
                "it.",
                DeprecationWarning,
                stacklevel=2,
            )
        self._prefer_checkpoint_for_recovery = bool(prefer_checkpoint_for_recovery)
        return self

    def enable_approximate_local_recovery(self, enabled: bool) -> CheckpointConfig:
        """Enable approximate local recovery (restart only failed tasks; may lose data)."""
        self._approximate_local_recovery = bool(enabled)
        return self

    def is_approximate_local_recovery_enabled(self) -> bool:
        """Whether approximate local recovery is enabled."""
        return self._approximate_local_recovery

    def set_checkpoint_id_of_ignored_in_flight_data(self, checkpoint_id: int) -> CheckpointConfig:
        """Recover from ``checkpoint_id`` without its in-flight (channel) data (-1: none)."""
        self._ignored_in_flight_checkpoint_id = _as_int(checkpoint_id, "checkpoint_id")
        return self

    def get_checkpoint_id_of_ignored_in_flight_data(self) -> int:
        """The checkpoint id whose in-flight data is ignored on recovery (-1: none)."""
        return self._ignored_in_flight_checkpoint_id

    def is_checkpoints_after_tasks_finish_enabled(self) -> bool:
        """Whether checkpoints continue after some tasks finished (default True)."""
        return self._after_tasks_finish

    def enable_checkpoints_after_tasks_finish(self, enabled: bool = True) -> CheckpointConfig:
        """Enable (or disable) checkpoints after some tasks finished."""
        self._after_tasks_finish = bool(enabled)
        return self

    # ---- configuration keys ------------------------------------------------------------

    def configure(self, configuration: Mapping[str, Any]) -> CheckpointConfig:
        """Apply Flink keys (``execution.checkpointing.*`` and their deprecated spellings).

        All keys are validated together; on error nothing changes.
        """
        trial = self.copy()
        trial._apply(configuration)
        self.__dict__.update(trial.__dict__)
        return self

    def _apply(self, config: Mapping[str, Any]) -> None:
        backlog = Opt.CHECKPOINTING_INTERVAL_DURING_BACKLOG
        apply_options(
            config,
            (
                (Opt.CHECKPOINTING_INTERVAL, self.set_checkpoint_interval),
                (backlog, self.set_checkpoint_interval_during_backlog),
            ),
        )
        # Mode, unaligned and concurrency are checked together once all are read.
        mode = self._mode
        if Opt.CHECKPOINTING_CONSISTENCY_MODE.is_set(config):
            mode = CheckpointingMode[Opt.CHECKPOINTING_CONSISTENCY_MODE.read(config)]
        unaligned = self._unaligned
        if Opt.ENABLE_UNALIGNED.is_set(config):
            unaligned = Opt.ENABLE_UNALIGNED.read(config)
        max_concurrent = self._max_concurrent
        if Opt.MAX_CONCURRENT_CHECKPOINTS.is_set(config):
            max_concurrent = Opt.MAX_CONCURRENT_CHECKPOINTS.read(config)
        _check_unaligned(unaligned, mode, max_concurrent)
        self._mode, self._unaligned, self._max_concurrent = mode, unaligned, max_concurrent
        apply_options(
            config,
            (
                (Opt.CHECKPOINTING_TIMEOUT, self.set_checkpoint_timeout),
                (Opt.MIN_PAUSE_BETWEEN_CHECKPOINTS, self.set_min_pause_between_checkpoints),
                (Opt.TOLERABLE_FAILURE_NUMBER, self.set_tolerable_checkpoint_failure_number),
                (Opt.MAX_RETAINED_CHECKPOINTS, self.set_num_retained_checkpoints),
                (Opt.EXTERNALIZED_CHECKPOINT_RETENTION, self.set_externalized_checkpoint_retention),
                (Opt.ALIGNED_CHECKPOINT_TIMEOUT, self.set_aligned_checkpoint_timeout),
                (Opt.FORCE_UNALIGNED, self.set_force_unaligned_checkpoints),
                (
                    Opt.ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH,
                    self.enable_checkpoints_after_tasks_finish,
                ),
                (Opt.PREFER_CHECKPOINT_FOR_RECOVERY, self.set_prefer_checkpoint_for_recovery),
                (Recovery.APPROXIMATE_LOCAL_RECOVERY, self.enable_approximate_local_recovery),
                (
                    Recovery.CHECKPOINT_ID_OF_IGNORED_IN_FLIGHT_DATA,
                    self.set_checkpoint_id_of_ignored_in_flight_data,
                ),
            ),
        )
        self._apply_storage(config)

    def _apply_storage(self, config: Mapping[str, Any]) -> None:
        kind = Opt.CHECKPOINT_STORAGE.read(config)
        if kind is None and not Opt.CHECKPOINTS_DIRECTORY.is_set(config):
            return
        from sparkpoint.datastream import checkpoint_storage as cs

        if kind == "jobmanager":
            self._storage = cs.JobManagerCheckpointStorage.create_from_config(config)
        elif not Opt.CHECKPOINTS_DIRECTORY.is_set(config):
            raise ConfigurationError(
                f"{Opt.CHECKPOINT_STORAGE.key} is 'filesystem' but no checkpoint directory is "
                f"configured: set {Opt.CHECKPOINTS_DIRECTORY.key} "
                f"({', '.join(Opt.CHECKPOINTS_DIRECTORY.deprecated_keys)})"
            )
        else:
            self._storage = cs.FileSystemCheckpointStorage.create_from_config(config)

    def to_dict(self) -> dict[str, str]:
        """The settings as Flink 2.x configuration keys and string values."""
        storage = self._storage
        path = getattr(storage, "get_checkpoint_path", lambda: None)() if storage else None
        values: tuple[tuple[ConfigOption[Any], object], ...] = (
            (Opt.CHECKPOINTING_INTERVAL, self._interval if self._interval > 0 else None),
            (Opt.CHECKPOINTING_INTERVAL_DURING_BACKLOG, self._interval_during_backlog),
            (Opt.CHECKPOINTING_CONSISTENCY_MODE, self._mode),
            (Opt.CHECKPOINTING_TIMEOUT, self._timeout),
            (Opt.MIN_PAUSE_BETWEEN_CHECKPOINTS, self._min_pause),
            (Opt.MAX_CONCURRENT_CHECKPOINTS, self._max_concurrent),
            (Opt.TOLERABLE_FAILURE_NUMBER, self._tolerable),
            (Opt.MAX_RETAINED_CHECKPOINTS, self._num_retained),
            (Opt.EXTERNALIZED_CHECKPOINT_RETENTION, self._retention),
            (Opt.ENABLE_UNALIGNED, self._unaligned),
            (Opt.ALIGNED_CHECKPOINT_TIMEOUT, self._aligned_timeout),
            (Opt.FORCE_UNALIGNED, self._force_unaligned),
            (Opt.ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH, self._after_tasks_finish),
            (Opt.PREFER_CHECKPOINT_FOR_RECOVERY, self._prefer_checkpoint_for_recovery),
            (Recovery.APPROXIMATE_LOCAL_RECOVERY, self._approximate_local_recovery),
            (
                Recovery.CHECKPOINT_ID_OF_IGNORED_IN_FLIGHT_DATA,
                self._ignored_in_flight_checkpoint_id,
            ),
            (Opt.CHECKPOINTS_DIRECTORY, path),
        )
        return {option.key: option.format(value) for option, value in values if value is not None}

    def copy(self) -> CheckpointConfig:
        """An independent copy (the storage object is shared: it is configuration only)."""
        clone = CheckpointConfig.__new__(CheckpointConfig)
        clone.__dict__.update(self.__dict__)
        return clone

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CheckpointConfig):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CheckpointConfig({self.to_dict()})"


def _check_unaligned(unaligned: bool, mode: CheckpointingMode, max_concurrent: int) -> None:
    if not unaligned:
        return
    if mode is not CheckpointingMode.EXACTLY_ONCE:
        raise ValueError(
            "Unaligned checkpoints are only supported with CheckpointingMode.EXACTLY_ONCE: "
            "disable unaligned checkpoints before choosing AT_LEAST_ONCE, or keep EXACTLY_ONCE"
        )
    if max_concurrent > 1:
        raise ValueError(
            f"Unaligned checkpoints need max concurrent checkpoints of 1 (got {max_concurrent}): "
            "maxConcurrentCheckpoints can't be > 1 if unaligned checkpoints are enabled"
        )


def _as_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {value!r}")
    return value
