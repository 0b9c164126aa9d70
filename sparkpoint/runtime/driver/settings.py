"""The runtime's ``JobSettings`` and how they are read from a job's configuration.

The API layer hands over a ``JobRequest``: one mapping of Flink keys holding everything the
user configured and everything set through the API that has a key (the checkpoint config,
parallelism, runtime mode, ...), plus the objects that have none (state backend, checkpoint
storage, restart strategy, fault injection).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sparkpoint.checkpoint.storage_policies import (
    JobManagerCheckpointStorage,
    check_scheme,
    validate_path,
)
from sparkpoint.checkpoint.trust import SnapshotTrust
from sparkpoint.config import (
    CheckpointingOptions,
    CoreOptions,
    DashboardOptions,
    ExecutionOptions,
    MetricOptions,
    PipelineOptions,
    RestartStrategyOptions,
    RestOptions,
    SparkpointOptions,
    StateBackendOptions,
    StateRecoveryOptions,
    validate,
)
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.driver.coordinator import CheckpointPolicy
from sparkpoint.runtime.driver.reports import EpochStart
from sparkpoint.runtime.protocol import TaskFaultHooks
from sparkpoint.state.key_groups import compute_default_max_parallelism

__all__ = [
    "JobFaultHooks",
    "JobRequest",
    "JobSettings",
    "ServerSettings",
    "build_job_settings",
    "check_configuration",
]

_CKPT = CheckpointingOptions
# Directories must also not be a root; a restore pointer may be a directory or a file.
_PATH_CHECKS = (
    (_CKPT.CHECKPOINTS_DIRECTORY, validate_path),
    (_CKPT.SAVEPOINT_DIRECTORY, validate_path),
    (StateRecoveryOptions.SAVEPOINT_PATH, check_scheme),
)


class JobFaultHooks(Protocol):
    """Fault injection for a job (implemented by ``sparkpoint.testing.Faults``)."""

    def before_epoch(self, event: EpochStart) -> None:
        """Called on the driver before every run of an epoch."""

    def task_hooks(self) -> TaskFaultHooks | None:
        """The picklable part that runs inside tasks (None: nothing to do there)."""


@dataclass(frozen=True)
class ServerSettings:
    """What the driver serves for a job, and where: the job's server (dashboard, REST API)
    on ``host``:``port``; ``/metrics`` alone on ``prometheus_port`` (None: not served
    there) when the Prometheus reporter is on and the dashboard off."""

    host: str = "127.0.0.1"
    port: int = 0
    refresh_ms: int = 2000
    dashboard: bool = False
    rest: bool = False
    jobs_dir: str | None = None  # where the REST endpoint's address and token file go
    prometheus_port: int | None = None

    @property
    def job_server(self) -> bool:
        """Whether the job's server runs (the dashboard or the REST API is on)."""
        return self.dashboard or self.rest


@dataclass
class JobSettings:
    """How to run a job: everything the environment configured."""

    job_name: str
    parallelism: int
    max_parallelism: int
    explicit_max_parallelism: bool
    policy: CheckpointPolicy
    checkpoint_storage: Any
    state_backend: Any
    restart_strategy: Any
    num_retained: int = CheckpointingOptions.MAX_RETAINED_CHECKPOINTS.default
    batch_mode: bool = False
    periodic_watermarks: bool = True
    restore_path: str | None = None
    # Whether tasks unpickle restored state (else plain data only): sparkpoint.snapshot.
    # allow-pickle, or by the origin of what the job starts from (JobRestore.initial).
    pickle_allowed: bool = True
    claim_mode: str = StateRecoveryOptions.CLAIM_MODE.default
    allow_non_restored_state: bool = False
    restore_attempts: int = RestartStrategyOptions.RESTORE_ATTEMPTS.default  # per snapshot
    restore_timeout_ms: int = RestartStrategyOptions.RESTORE_TIMEOUT.default  # 0: none
    max_records_per_split: int = SparkpointOptions.MAX_RECORDS_PER_SPLIT.default
    tasks_per_core: int = SparkpointOptions.TASKS_PER_CORE.default  # task groups
    epoch_mode: str = SparkpointOptions.EPOCH_MODE.default  # auto | job | long-running
    changelog: bool = SparkpointOptions.CHANGELOG_ENABLED.default  # per-subtask recovery
    changelog_checkpoints: bool = StateBackendOptions.CHANGELOG_ENABLED.default
    materialize_interval_ms: int = StateBackendOptions.PERIODIC_MATERIALIZE_INTERVAL.default
    materialization_rate: int | None = None  # bytes per second per subtask; None: no limit
    periodic_materialization: bool = True
    materialization_failures_allowed: int = (
        StateBackendOptions.MATERIALIZATION_MAX_FAILURES_ALLOWED.default
    )
    # How often the driver looks for new input while it waits between epochs.
    idle_sleep_s: float = 0.2
    # Least time between epoch starts while input is sparse (sparkpoint.epoch.interval, or
    # its default from the checkpoint interval); whether the key set it.
    epoch_interval_ms: int = 1000
    epoch_interval_set: bool = False
    # sparkpoint.epoch.target-duration (None: from the interval; 0: epochs are not sized).
    epoch_target_ms: int | None = None
    # execution.buffer-timeout (-1: none): the long-running mode's epoch interval when no
    # sink waits for checkpoints to publish (epoch_pacing.py).
    buffer_timeout_ms: int = ExecutionOptions.BUFFER_TIMEOUT.default
    # sparkpoint.epoch.upload-wait: how long tasks wait for their asynchronous uploads
    upload_wait_ms: int = 500
    # With no input, an empty epoch runs this often (None: only when the job needs one;
    # sparkpoint.epoch.idle-interval, see epoch_pacing.py).
    idle_epoch_interval_ms: int | None = None
    # sparkpoint.local-state.dir: None keeps local state in each executor's Spark local dir
    local_state_dir: str | None = None
    job_parameters: dict[str, str] = field(default_factory=dict)
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    faults: JobFaultHooks | None = None  # fault injection (sparkpoint.testing)
    server: ServerSettings = field(default_factory=ServerSettings)  # dashboard, REST, metrics


@dataclass(frozen=True)
class JobRequest:
    """What the API layer hands the runtime to run a job."""

    configuration: Mapping[str, Any]
    state_backend: Any
    checkpoint_storage: Any = None
    restart_strategy: Any = None
    job_parameters: Mapping[str, str] = field(default_factory=dict)
    faults: Any = None  # JobFaultHooks (sparkpoint.testing.Faults)
    # The environment's set_buffer_timeout (-1: none); None: execution.buffer-timeout.
    buffer_timeout_ms: int | None = None


def check_configuration(config: Mapping[str, Any]) -> None:
    """Raise ``ConfigurationError`` for any invalid value of a known key in ``config``,
    including a path whose filesystem scheme is unknown."""
    validate(config)
    for option, check in _PATH_CHECKS:
        key, path = option.find_key(config), option.read(config)
        if key is not None and path is not None:
            check(path, key)


def _changelog_checkpoints(config: Mapping[str, Any]) -> bool:
    """state.backend.changelog.enabled; its checkpoints are made of the changelog entries
    that sparkpoint.state.changelog.enabled stores, so that one cannot be off."""
    enabled = StateBackendOptions.CHANGELOG_ENABLED.read(config)
    if enabled and not SparkpointOptions.CHANGELOG_ENABLED.read(config):
        raise ConfigurationError(
            f"{StateBackendOptions.CHANGELOG_ENABLED.key}=true needs "
            f"{SparkpointOptions.CHANGELOG_ENABLED.key}=true (changelog checkpoints are made "
            "of the changes it stores); allowed: enable both, or disable "
            f"{StateBackendOptions.CHANGELOG_ENABLED.key}"
        )
    return enabled


def _checkpoint_policy(config: Mapping[str, Any], storage: Any = None) -> CheckpointPolicy:
    """The coordinator's policy; its trust knows the checkpoint directory of ``storage``
    (without one, its savepoint directory), whose origin key marks the job's own snapshots
    (``checkpoint.origin``)."""
    interval = _CKPT.CHECKPOINTING_INTERVAL.read(config)
    checkpoint_dir = None
    for getter in ("get_checkpoint_path", "get_savepoint_path"):
        get_path = getattr(storage, getter, None)
        checkpoint_dir = checkpoint_dir or (get_path() if callable(get_path) else None)
    return CheckpointPolicy(
        interval_ms=-1 if interval is None else interval,
        timeout_ms=_CKPT.CHECKPOINTING_TIMEOUT.read(config),
        min_pause_ms=_CKPT.MIN_PAUSE_BETWEEN_CHECKPOINTS.read(config),
        max_concurrent=_CKPT.MAX_CONCURRENT_CHECKPOINTS.read(config),
        tolerable_failures=_CKPT.TOLERABLE_FAILURE_NUMBER.read(config),
        retention=_CKPT.EXTERNALIZED_CHECKPOINT_RETENTION.read(config),
        prefer_checkpoint_for_recovery=_CKPT.PREFER_CHECKPOINT_FOR_RECOVERY.read(config),
        at_least_once=_CKPT.CHECKPOINTING_CONSISTENCY_MODE.read(config) == "AT_LEAST_ONCE",
        trust=replace(SnapshotTrust.from_config(config), origin_dir=checkpoint_dir),
    )


def _epoch_interval_ms(config: Mapping[str, Any], policy: CheckpointPolicy) -> int:
    """sparkpoint.epoch.interval; unset: the checkpoint interval (epochs between
    checkpoints would publish nothing to exactly-once sinks), else 1 s."""
    interval = SparkpointOptions.EPOCH_INTERVAL.read(config)
    if interval is not None:
        return interval
    return policy.interval_ms if policy.enabled else 1000


def _checkpoint_storage(request: JobRequest) -> Any:
    """The storage set in code, else the legacy backend's, else the JobManager's; then
    configured from the keys (a savepoint directory, the inline threshold, ...)."""
    storage = request.checkpoint_storage
    if storage is None:
        getter = getattr(request.state_backend, "get_checkpoint_storage", None)
        storage = getter() if callable(getter) else None
    if storage is None:
        storage = JobManagerCheckpointStorage()
    return storage.configure(request.configuration)


def build_job_settings(job_name: str, request: JobRequest) -> JobSettings:
    """The settings of one job run."""
    config = request.configuration
    storage = _checkpoint_storage(request)
    parallelism = CoreOptions.DEFAULT_PARALLELISM.read(config)
    if parallelism is None:
        raise ValueError(f"{CoreOptions.DEFAULT_PARALLELISM.key} must be set to run a job")
    max_parallelism = PipelineOptions.MAX_PARALLELISM.read(config)
    settings = JobSettings(
        job_name=job_name,
        parallelism=parallelism,
        max_parallelism=max_parallelism or compute_default_max_parallelism(parallelism),
        explicit_max_parallelism=max_parallelism is not None,
        policy=_checkpoint_policy(config, storage),
        checkpoint_storage=storage,
        state_backend=request.state_backend,
        restart_strategy=request.restart_strategy,
        num_retained=_CKPT.MAX_RETAINED_CHECKPOINTS.read(config),
        batch_mode=ExecutionOptions.RUNTIME_MODE.read(config) == "BATCH",
        periodic_watermarks=PipelineOptions.AUTO_WATERMARK_INTERVAL.read(config) > 0,
        restore_path=StateRecoveryOptions.SAVEPOINT_PATH.read(config),
        claim_mode=StateRecoveryOptions.CLAIM_MODE.read(config),
        allow_non_restored_state=StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE.read(config),
        restore_attempts=RestartStrategyOptions.RESTORE_ATTEMPTS.read(config),
        restore_timeout_ms=RestartStrategyOptions.RESTORE_TIMEOUT.read(config),
        max_records_per_split=SparkpointOptions.MAX_RECORDS_PER_SPLIT.read(config),
        tasks_per_core=SparkpointOptions.TASKS_PER_CORE.read(config),
        epoch_mode=SparkpointOptions.EPOCH_MODE.read(config),
        changelog=SparkpointOptions.CHANGELOG_ENABLED.read(config),
        changelog_checkpoints=_changelog_checkpoints(config),
        materialize_interval_ms=StateBackendOptions.PERIODIC_MATERIALIZE_INTERVAL.read(config),
        materialization_rate=StateBackendOptions.MATERIALIZATION_MAX_UPLOAD_RATE.read(config),
        periodic_materialization=StateBackendOptions.PERIODIC_MATERIALIZE_ENABLED.read(config),
        materialization_failures_allowed=(
            StateBackendOptions.MATERIALIZATION_MAX_FAILURES_ALLOWED.read(config)
        ),
        job_parameters=dict(request.job_parameters),
        faults=request.faults,
    )
    settings.local_state_dir = SparkpointOptions.LOCAL_STATE_DIR.read(config)
    settings.epoch_interval_ms = _epoch_interval_ms(config, settings.policy)
    settings.epoch_interval_set = SparkpointOptions.EPOCH_INTERVAL.read(config) is not None
    settings.buffer_timeout_ms = (
        ExecutionOptions.BUFFER_TIMEOUT.read(config)
        if request.buffer_timeout_ms is None
        else request.buffer_timeout_ms
    )
    settings.idle_epoch_interval_ms = SparkpointOptions.IDLE_EPOCH_INTERVAL.read(config)
    settings.epoch_target_ms = SparkpointOptions.EPOCH_TARGET_DURATION.read(config)
    settings.upload_wait_ms = SparkpointOptions.UPLOAD_WAIT.read(config)
    settings.server = _server_settings(config)
    return settings


def _server_settings(config: Mapping[str, Any]) -> ServerSettings:
    """What the driver serves: the dashboard and the REST API share one server (the
    dashboard's address); ``/metrics`` is on it with the dashboard on, else alone on the
    Prometheus reporter's port when the reporter is configured (``MetricOptions``)."""
    dashboard = DashboardOptions.ENABLED.read(config)
    prometheus = MetricOptions.PROMETHEUS_FACTORY.read(config) is not None
    return ServerSettings(
        host=DashboardOptions.HOST.read(config),
        port=DashboardOptions.PORT.read(config),
        refresh_ms=DashboardOptions.REFRESH_INTERVAL.read(config),
        dashboard=dashboard,
        rest=RestOptions.ENABLED.read(config),
        jobs_dir=RestOptions.JOBS_DIR.read(config),
        prometheus_port=(
            MetricOptions.PROMETHEUS_PORT.read(config) if prometheus and not dashboard else None
        ),
    )
