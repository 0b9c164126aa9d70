"""``ExecutionConfig`` (``pyflink.common.ExecutionConfig``): a pure data holder.

Holds the PyFlink 1.x settings of a program's execution. Type registrations ("Kryo",
"POJO") keep Flink's names but register Python types: a type is named by its fully qualified
name (``module.QualName``) or given as the class itself, and a serializer may be a class, an
instance or a fully qualified name. The runtime looks serializers up with
``get_registered_type_serializer``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from enum import Enum
from typing import Any

from sparkpoint.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from sparkpoint.config import PipelineOptions

__all__ = ["ExecutionConfig", "ExecutionMode", "InputDependencyConstraint", "qualified_name"]

_UPPER_BOUND_MAX_PARALLELISM = 1 << 15


class ExecutionMode(Enum):
    """How data exchanges are performed (``pyflink.common.ExecutionMode``)."""

    PIPELINED = 0
    PIPELINED_FORCED = 1
    BATCH = 2
    BATCH_FORCED = 3


class InputDependencyConstraint(Enum):
    """When a task is scheduled relative to its inputs (deprecated in Flink 1.13)."""

    ANY = 0
    ALL = 1


def qualified_name(type_or_name: type | str | object) -> str:
    """``module.QualName`` of a class (or of an instance's class); strings pass through."""
    if isinstance(type_or_name, str):
        if not type_or_name:
            raise ValueError("A type name must not be empty")
        return type_or_name
    cls = type_or_name if isinstance(type_or_name, type) else type(type_or_name)
    return f"{cls.__module__}.{cls.__qualname__}"


def _check_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return value


class ExecutionConfig:
    """Settings of a program's execution (parallelism, watermarks, serialization, restarts)."""

    PARALLELISM_DEFAULT = -1
    PARALLELISM_UNKNOWN = -2

    def __init__(self) -> None:
        self._closure_cleaner = True
        self._auto_watermark_interval = PipelineOptions.AUTO_WATERMARK_INTERVAL.default
        self._latency_tracking_interval = 0
        self._parallelism = self.PARALLELISM_DEFAULT
        self._max_parallelism = -1
        self._task_cancellation_interval = -1
        self._task_cancellation_timeout = -1
        self._restart_strategy: RestartStrategyConfiguration = RestartStrategies.fall_back_restart()
        self._execution_mode = ExecutionMode.PIPELINED
        self._input_dependency_constraint = InputDependencyConstraint.ANY
        self._force_kryo = False
        self._generic_types_disabled = False
        self._auto_generated_uids = True
        self._force_avro = False
        self._object_reuse = False
        self._global_job_parameters: dict[str, str] = {}
        self._type_serializers: dict[str, object] = {}
        self._default_serializers: dict[str, object] = {}
        self._kryo_types: list[str] = []
        self._pojo_types: list[str] = []
        self._auto_type_registration_disabled = False
        self._use_snapshot_compression = False

    # ---- closure cleaner, watermarks, latency -------------------------------------------

    def enable_closure_cleaner(self) -> ExecutionConfig:
        """Enable the closure cleaner (recorded only; Python closures are pickled as is)."""
        self._closure_cleaner = True
        return self

    def disable_closure_cleaner(self) -> ExecutionConfig:
        """Disable the closure cleaner."""
        self._closure_cleaner = False
        return self

    def is_closure_cleaner_enabled(self) -> bool:
        """Whether the closure cleaner is enabled."""
        return self._closure_cleaner

    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        """Milliseconds between periodic watermark emissions (0 disables them)."""
        if _check_int(interval, "interval") < 0:
            raise ValueError(f"Auto watermark interval must not be negative, got {interval}.")
        self._auto_watermark_interval = interval
        return self

    def get_auto_watermark_interval(self) -> int:
        """Milliseconds between periodic watermark emissions."""
        return self._auto_watermark_interval

    def set_latency_tracking_interval(self, interval: int) -> ExecutionConfig:
        """Milliseconds between latency markers; <= 0 disables latency tracking."""
        self._latency_tracking_interval = _check_int(interval, "interval")
        return self

    def get_latency_tracking_interval(self) -> int:
        """Milliseconds between latency markers."""
        return self._latency_tracking_interval

    # ---- parallelism, cancellation -------------------------------------------------------

    def get_parallelism(self) -> int:
        """Default parallelism of operators, or ``PARALLELISM_DEFAULT``."""
        return self._parallelism

    def set_parallelism(self, parallelism: int) -> ExecutionConfig:
        """Set the default parallelism of operators (>= 1 or ``PARALLELISM_DEFAULT``)."""
        _check_int(parallelism, "parallelism")
        if parallelism < 1 and parallelism != self.PARALLELISM_DEFAULT:
            raise ValueError(
                "Parallelism must be at least one, or ExecutionConfig.PARALLELISM_DEFAULT "
                f"(use system default), got {parallelism}."
            )
        self._parallelism = parallelism
        return self

    def get_max_parallelism(self) -> int:
        """Maximum parallelism (number of key groups), or -1 when not set."""
        return self._max_parallelism

    def set_max_parallelism(self, max_parallelism: int) -> ExecutionConfig:
        """Set the maximum parallelism, i.e. the number of key groups (1..32768)."""
        _check_int(max_parallelism, "max_parallelism")
        if not 0 < max_parallelism <= _UPPER_BOUND_MAX_PARALLELISM:
            raise ValueError(
                f"The maximum parallelism must be greater than 0 and at most "
                f"{_UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism}."
            )
        self._max_parallelism = max_parallelism
        return self

    def get_task_cancellation_interval(self) -> int:
        """Milliseconds between attempts to cancel a running task (-1: cluster default)."""
        return self._task_cancellation_interval

    def set_task_cancellation_interval(self, interval: int) -> ExecutionConfig:
        """Set the milliseconds between attempts to cancel a running task."""
        self._task_cancellation_interval = _check_int(interval, "interval")
        return self

    def get_task_cancellation_timeout(self) -> int:
        """Milliseconds after which a stuck cancellation is fatal (-1: default, 0: never)."""
        return self._task_cancellation_timeout

    def set_task_cancellation_timeout(self, timeout: int) -> ExecutionConfig:
        """Set the cancellation timeout in milliseconds (>= 0)."""
        if _check_int(timeout, "timeout") < 0:
            raise ValueError(f"Timeout needs to be >= 0, got {timeout}.")
        self._task_cancellation_timeout = timeout
        return self

    # ---- restart strategy, modes --------------------------------------------------------

    def set_restart_strategy(
        self, restart_strategy_configuration: RestartStrategyConfiguration
    ) -> ExecutionConfig:
        """Set the restart strategy used after failures."""
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise TypeError(
                "restart_strategy_configuration must come from RestartStrategies, got "
                f"{restart_strategy_configuration!r}"
            )
        self._restart_strategy = restart_strategy_configuration
        return self

    def get_restart_strategy(self) -> RestartStrategyConfiguration:
        """The restart strategy (fallback to the cluster default unless set)."""
        return self._restart_strategy

    def set_execution_mode(self, execution_mode: ExecutionMode) -> ExecutionConfig:
        """Set the data exchange mode (recorded; epochs are always pipelined per stage)."""
        if not isinstance(execution_mode, ExecutionMode):
            raise TypeError(f"execution_mode must be an ExecutionMode, got {execution_mode!r}")
        self._execution_mode = execution_mode
        return self

    def get_execution_mode(self) -> ExecutionMode:
        """The data exchange mode."""
        return self._execution_mode

    def set_default_input_dependency_constraint(
        self, input_dependency_constraint: InputDependencyConstraint
    ) -> ExecutionConfig:
        """Deprecated in Flink 1.13 and unused; recorded with a DeprecationWarning."""
        warnings.warn(
            "Deprecated in 1.13. InputDependencyConstraint is not used anywhere.",
            DeprecationWarning,
            stacklevel=2,
        )
        if not isinstance(input_dependency_constraint, InputDependencyConstraint):
            raise TypeError(
                "input_dependency_constraint must be an InputDependencyConstraint, got "
                f"{input_dependency_constraint!r}"
            )
        self._input_dependency_constraint = input_dependency_constraint
        return self

    def get_default_input_dependency_constraint(self) -> InputDependencyConstraint:
        """Deprecated in Flink 1.13; the recorded constraint."""
        warnings.warn(
            "Deprecated in 1.13. InputDependencyConstraint is not used anywhere.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._input_dependency_constraint

    # ---- serialization switches ---------------------------------------------------------

    def enable_force_kryo(self) -> ExecutionConfig:
        """Record Flink's force-Kryo switch."""
        self._force_kryo = True
        return self

    def disable_force_kryo(self) -> ExecutionConfig:
        """Clear Flink's force-Kryo switch."""
        self._force_kryo = False
        return self

    def is_force_kryo_enabled(self) -> bool:
        """Flink's force-Kryo switch."""
        return self._force_kryo

    def enable_generic_types(self) -> ExecutionConfig:
        """Allow generic (pickled) types; the default."""
        self._generic_types_disabled = False
        return self

    def disable_generic_types(self) -> ExecutionConfig:
        """Forbid generic (pickled) types so that only declared ``Types`` are used."""
        self._generic_types_disabled = True
        return self

    def has_generic_types_disabled(self) -> bool:
        """Whether generic types are forbidden."""
        return self._generic_types_disabled

    def enable_auto_generated_uids(self) -> ExecutionConfig:
        """Let operators without ``uid`` get generated ones; the default."""
        self._auto_generated_uids = True
        return self

    def disable_auto_generated_uids(self) -> ExecutionConfig:
        """Require every stateful operator to have an explicit ``uid``."""
        self._auto_generated_uids = False
        return self

    def has_auto_generated_uids_enabled(self) -> bool:
        """Whether operator uids may be generated."""
        return self._auto_generated_uids

    def enable_force_avro(self) -> ExecutionConfig:
        """Record Flink's force-Avro switch."""
        self._force_avro = True
        return self

    def disable_force_avro(self) -> ExecutionConfig:
        """Clear Flink's force-Avro switch."""
        self._force_avro = False
        return self

    def is_force_avro_enabled(self) -> bool:
        """Flink's force-Avro switch."""
        return self._force_avro

    def enable_object_reuse(self) -> ExecutionConfig:
        """Allow the runtime to pass the same record object on without copying."""
        self._object_reuse = True
        return self

    def disable_object_reuse(self) -> ExecutionConfig:
        """Copy records between chained operators; the default."""
        self._object_reuse = False
        return self

    def is_object_reuse_enabled(self) -> bool:
        """Whether object reuse is enabled."""
        return self._object_reuse

    # ---- job parameters -----------------------------------------------------------------

    def get_global_job_parameters(self) -> dict[str, str]:
        """A copy of the global job parameters."""
        return dict(self._global_job_parameters)

    def set_global_job_parameters(
        self, global_job_parameters_dict: Mapping[str, Any]
    ) -> ExecutionConfig:
        """Replace the global job parameters (values are stored as strings, as PyFlink does)."""
        self._global_job_parameters = {
            str(key): value if isinstance(value, str) else str(value)
            for key, value in global_job_parameters_dict.items()
        }
        return self

    # ---- type registration --------------------------------------------------------------

    def add_default_kryo_serializer(
        self, type_class_name: type | str, serializer_class_name: type | str | object
    ) -> ExecutionConfig:
        """Register a default serializer for a type and its subclasses."""
        self._default_serializers[qualified_name(type_class_name)] = serializer_class_name
        return self

    def register_type_with_kryo_serializer(
        self, type_class_name: type | str, serializer_class_name: type | str | object
    ) -> ExecutionConfig:
        """Register the serializer for exactly this type."""
        self._type_serializers[qualified_name(type_class_name)] = serializer_class_name
        return self

    def register_pojo_type(self, type_class_name: type | str) -> ExecutionConfig:
        """Register a record type with the serialization stack."""
        name = qualified_name(type_class_name)
        if name not in self._pojo_types:
            self._pojo_types.append(name)
        return self

    def register_kryo_type(self, type_class_name: type | str) -> ExecutionConfig:
        """Register a generic type with the serialization stack."""
        name = qualified_name(type_class_name)
        if name not in self._kryo_types:
            self._kryo_types.append(name)
        return self

    def get_registered_types_with_kryo_serializer_classes(self) -> dict[str, str]:
        """Type name -> serializer name of the exact-type registrations."""
        return {k: qualified_name(v) for k, v in self._type_serializers.items()}

    def get_default_kryo_serializer_classes(self) -> dict[str, str]:
        """Type name -> serializer name of the default registrations."""
        return {k: qualified_name(v) for k, v in self._default_serializers.items()}

    def get_registered_kryo_types(self) -> list[str]:
        """Names of the registered generic types, in registration order."""
        return list(self._kryo_types)

    def get_registered_pojo_types(self) -> list[str]:
        """Names of the registered record types, in registration order."""
        return list(self._pojo_types)

    def get_registered_type_serializer(self, type_or_name: type | str) -> object | None:
        """The serializer registered for a type: exact registration first, then a default
        registered for the type or (for classes) its nearest base class; None if none."""
        exact = self._type_serializers.get(qualified_name(type_or_name))
        if exact is not None:
            return exact
        if isinstance(type_or_name, type):
            for base in type_or_name.__mro__:
                found = self._default_serializers.get(qualified_name(base))
                if found is not None:
                    return found
            return None
        return self._default_serializers.get(type_or_name)

    def is_auto_type_registration_disabled(self) -> bool:
        """Whether automatic type registration is off."""
        return self._auto_type_registration_disabled

    def disable_auto_type_registration(self) -> ExecutionConfig:
        """Turn automatic type registration off."""
        self._auto_type_registration_disabled = True
        return self

    def is_use_snapshot_compression(self) -> bool:
        """Whether keyed-state snapshots are compressed."""
        return self._use_snapshot_compression

    def set_use_snapshot_compression(self, use_snapshot_compression: bool) -> ExecutionConfig:
        """Compress keyed-state snapshots (full checkpoints and savepoints)."""
        self._use_snapshot_compression = bool(use_snapshot_compression)
        return self

    # ---- value semantics ----------------------------------------------------------------

    def _key(self) -> tuple[Any, ...]:
        return (
            self._closure_cleaner,
            self._auto_watermark_interval,
            self._latency_tracking_interval,
            self._parallelism,
            self._max_parallelism,
            self._task_cancellation_interval,
            self._task_cancellation_timeout,
            self._restart_strategy,
            self._execution_mode,
            self._input_dependency_constraint,
            self._force_kryo,
            self._generic_types_disabled,
            self._auto_generated_uids,
            self._force_avro,
            self._object_reuse,
            tuple(sorted(self._global_job_parameters.items())),
            tuple(sorted(self.get_registered_types_with_kryo_serializer_classes().items())),
            tuple(sorted(self.get_default_kryo_serializer_classes().items())),
            tuple(self._kryo_types),
            tuple(self._pojo_types),
            self._auto_type_registration_disabled,
            self._use_snapshot_compression,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecutionConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"ExecutionConfig(parallelism={self._parallelism}, "
            f"max_parallelism={self._max_parallelism}, "
            f"auto_watermark_interval={self._auto_watermark_interval}, "
            f"restart_strategy={self._restart_strategy!r})"
        )
