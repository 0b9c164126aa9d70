"""ExecutionConfig: PyFlink 1.x getters/setters, defaults, validation and type registrations.

Cases mirror apache/flink flink-python/pyflink/common/tests/test_execution_config.py.
"""

from __future__ import annotations

import pytest

from sparkpoint.common.execution_config import (
    ExecutionConfig,
    ExecutionMode,
    InputDependencyConstraint,
    qualified_name,
)
from sparkpoint.common.restart_strategy import RestartStrategies


class Point:
    pass


class Point3D(Point):
    pass


class PointSerializer:
    pass


@pytest.fixture
def config() -> ExecutionConfig:
    return ExecutionConfig()


def test_constants() -> None:
    assert ExecutionConfig.PARALLELISM_DEFAULT == -1
    assert ExecutionConfig.PARALLELISM_UNKNOWN == -2


def test_defaults(config: ExecutionConfig) -> None:
    assert config.is_closure_cleaner_enabled() is True
    assert config.get_auto_watermark_interval() == 200
    assert config.get_latency_tracking_interval() == 0
    assert config.get_parallelism() == ExecutionConfig.PARALLELISM_DEFAULT
    assert config.get_max_parallelism() == -1
    assert config.get_task_cancellation_interval() == -1
    assert config.get_task_cancellation_timeout() == -1
    assert config.get_restart_strategy() == RestartStrategies.fall_back_restart()
    assert config.get_execution_mode() is ExecutionMode.PIPELINED
    assert config.is_force_kryo_enabled() is False
    assert config.has_generic_types_disabled() is False
    assert config.has_auto_generated_uids_enabled() is True
    assert config.is_force_avro_enabled() is False
    assert config.is_object_reuse_enabled() is False
    assert config.get_global_job_parameters() == {}
    assert config.is_auto_type_registration_disabled() is False
    assert config.is_use_snapshot_compression() is False


def test_closure_cleaner(config: ExecutionConfig) -> None:
    assert config.disable_closure_cleaner() is config
    assert config.is_closure_cleaner_enabled() is False
    config.enable_closure_cleaner()
    assert config.is_closure_cleaner_enabled() is True


def test_auto_watermark_interval(config: ExecutionConfig) -> None:
    assert config.set_auto_watermark_interval(1000) is config
    assert config.get_auto_watermark_interval() == 1000
    config.set_auto_watermark_interval(0)
    assert config.get_auto_watermark_interval() == 0
    with pytest.raises(ValueError, match="must not be negative"):
        config.set_auto_watermark_interval(-1)
    with pytest.raises(TypeError, match="interval must be an integer"):
        config.set_auto_watermark_interval(1.5)  # type: ignore[arg-type]


def test_latency_tracking_interval(config: ExecutionConfig) -> None:
    config.set_latency_tracking_interval(500)
    assert config.get_latency_tracking_interval() == 500


def test_parallelism(config: ExecutionConfig) -> None:
    config.set_parallelism(8)
    assert config.get_parallelism() == 8
    config.set_parallelism(4)
    assert config.get_parallelism() == 4
    config.set_parallelism(ExecutionConfig.PARALLELISM_DEFAULT)
    assert config.get_parallelism() == -1
    with pytest.raises(ValueError, match="Parallelism must be at least one"):
        config.set_parallelism(0)


def test_max_parallelism(config: ExecutionConfig) -> None:
    assert config.set_max_parallelism(12) is config
    assert config.get_max_parallelism() == 12
    config.set_max_parallelism(32768)
    assert config.get_max_parallelism() == 32768
    with pytest.raises(ValueError, match="maximum parallelism"):
        config.set_max_parallelism(0)
    with pytest.raises(ValueError, match="maximum parallelism"):
        config.set_max_parallelism(32769)


def test_task_cancellation(config: ExecutionConfig) -> None:
    config.set_task_cancellation_interval(1000)
    assert config.get_task_cancellation_interval() == 1000
    config.set_task_cancellation_timeout(3000)
    assert config.get_task_cancellation_timeout() == 3000
    with pytest.raises(ValueError, match="Timeout needs to be >= 0"):
        config.set_task_cancellation_timeout(-1)


def test_restart_strategy(config: ExecutionConfig) -> None:
    config.set_restart_strategy(RestartStrategies.no_restart())
    assert config.get_restart_strategy() == RestartStrategies.no_restart()
    config.set_restart_strategy(RestartStrategies.failure_rate_restart(5, 10000, 5000))
    assert isinstance(
        config.get_restart_strategy(), RestartStrategies.FailureRateRestartStrategyConfiguration
    )
    config.set_restart_strategy(RestartStrategies.fixed_delay_restart(4, 10000))
    assert config.get_restart_strategy() == RestartStrategies.fixed_delay_restart(4, 10000)
    config.set_restart_strategy(RestartStrategies.fall_back_restart())
    assert config.get_restart_strategy() == RestartStrategies.fall_back_restart()
    with pytest.raises(TypeError, match="RestartStrategies"):
        config.set_restart_strategy("fixed-delay")  # type: ignore[arg-type]


def test_execution_mode(config: ExecutionConfig) -> None:
    for mode in (
        ExecutionMode.BATCH,
        ExecutionMode.PIPELINED,
        ExecutionMode.BATCH_FORCED,
        ExecutionMode.PIPELINED_FORCED,
    ):
        config.set_execution_mode(mode)
        assert config.get_execution_mode() is mode


def test_input_dependency_constraint_is_deprecated(config: ExecutionConfig) -> None:
    with pytest.warns(DeprecationWarning, match="Deprecated in 1.13"):
        config.set_default_input_dependency_constraint(InputDependencyConstraint.ALL)
    with pytest.warns(DeprecationWarning):
        assert config.get_default_input_dependency_constraint() is InputDependencyConstraint.ALL


def test_switches(config: ExecutionConfig) -> None:
    config.disable_force_kryo()
    assert config.is_force_kryo_enabled() is False
    config.enable_force_kryo()
    assert config.is_force_kryo_enabled() is True
    config.disable_generic_types()
    assert config.has_generic_types_disabled() is True
    config.enable_generic_types()
    assert config.has_generic_types_disabled() is False
    config.disable_auto_generated_uids()
    assert config.has_auto_generated_uids_enabled() is False
    config.enable_auto_generated_uids()
    assert config.has_auto_generated_uids_enabled() is True
    config.disable_force_avro()
    assert config.is_force_avro_enabled() is False
    config.enable_force_avro()
    assert config.is_force_avro_enabled() is True
    config.disable_object_reuse()
    assert config.is_object_reuse_enabled() is False
    config.enable_object_reuse()
    assert config.is_object_reuse_enabled() is True
    config.disable_auto_type_registration()
    assert config.is_auto_type_registration_disabled() is True
    config.set_use_snapshot_compression(True)
    assert config.is_use_snapshot_compression() is True
    config.set_use_snapshot_compression(False)
    assert config.is_use_snapshot_compression() is False


def test_global_job_parameters_are_strings_and_copied(config: ExecutionConfig) -> None:
    config.set_global_job_parameters({"hello": "world", "interval": 1000})
    params = config.get_global_job_parameters()
    assert params == {"hello": "world", "interval": "1000"}
    params["hello"] = "changed"
    assert config.get_global_job_parameters()["hello"] == "world"


def test_kryo_serializer_registrations_by_name(config: ExecutionConfig) -> None:
    config.add_default_kryo_serializer("com.aaa.bbb.PojoClass", "com.aaa.bbb.Serializer")
    assert config.get_default_kryo_serializer_classes() == {
        "com.aaa.bbb.PojoClass": "com.aaa.bbb.Serializer"
    }
    config.register_type_with_kryo_serializer("com.aaa.bbb.PojoClass", "com.aaa.bbb.Serializer")
    assert config.get_registered_types_with_kryo_serializer_classes() == {
        "com.aaa.bbb.PojoClass": "com.aaa.bbb.Serializer"
    }


def test_python_type_registrations(config: ExecutionConfig) -> None:
    serializer = PointSerializer()
    config.register_type_with_kryo_serializer(Point, serializer)
    assert config.get_registered_types_with_kryo_serializer_classes() == {
        f"{__name__}.Point": f"{__name__}.PointSerializer"
    }
    assert config.get_registered_type_serializer(Point) is serializer
    assert config.get_registered_type_serializer(f"{__name__}.Point") is serializer
    # Default serializers apply to subclasses; exact registrations do not.
    assert config.get_registered_type_serializer(Point3D) is None
    config.add_default_kryo_serializer(Point, PointSerializer)
    assert config.get_registered_type_serializer(Point3D) is PointSerializer
    assert config.get_registered_type_serializer(int) is None


def test_pojo_and_kryo_types(config: ExecutionConfig) -> None:
    config.register_pojo_type("org.apache.flink.runtime.state.StateBackendTestBase$TestPojo")
    config.register_pojo_type(Point)
    config.register_pojo_type(Point)
    assert config.get_registered_pojo_types() == [
        "org.apache.flink.runtime.state.StateBackendTestBase$TestPojo",
        f"{__name__}.Point",
    ]
    config.register_kryo_type(Point3D)
    assert config.get_registered_kryo_types() == [f"{__name__}.Point3D"]
    with pytest.raises(ValueError, match="must not be empty"):
        config.register_kryo_type("")


def test_qualified_name() -> None:
    assert qualified_name(Point) == f"{__name__}.Point"
    assert qualified_name(Point()) == f"{__name__}.Point"
    assert qualified_name("a.b.C") == "a.b.C"


def test_equals_and_hash() -> None:
    config1, config2 = ExecutionConfig(), ExecutionConfig()
    assert config1 == config2
    assert hash(config1) == hash(config2)
    config1.set_parallelism(12)
    config2.set_parallelism(11)
    assert config1 != config2
    assert hash(config1) != hash(config2)
    config2.set_parallelism(12)
    assert config1 == config2
    assert hash(config1) == hash(config2)
    config1.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 10))
    assert config1 != config2
    config2.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 10))
    assert config1 == config2
