"""Issue 12: configuration errors name the key, the bad value and what is allowed, and are
raised when the value is set (``Configuration``, ``configure()``, API setters), not later.

Nothing here starts Spark.
"""

from __future__ import annotations

from typing import Any

import pytest

from sparkpoint.common import Configuration, Duration, Time
from sparkpoint.datastream import (
    CheckpointConfig,
    EmbeddedRocksDBStateBackend,
    FileSystemCheckpointStorage,
    FsStateBackend,
    RocksDBStateBackend,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
    TimeCharacteristic,
)
from sparkpoint.errors import ConfigurationError

RUNTIME_MODE_ERROR = (
    "Could not parse value 'bogus' for 'execution.runtime-mode': expected one of STREAMING, "
    "BATCH, AUTOMATIC"
)
PARALLELISM_ERROR = (
    "Could not parse value 'abc' for 'parallelism.default': expected an integer >= 1"
)


def _message(info: pytest.ExceptionInfo[BaseException]) -> str:
    assert isinstance(info.value, ConfigurationError) and isinstance(info.value, ValueError)
    return str(info.value)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("execution.runtime-mode", "bogus", RUNTIME_MODE_ERROR),
        ("parallelism.default", "abc", PARALLELISM_ERROR),
    ],
)
def test_set_on_a_configuration(key: str, value: str, message: str) -> None:
    conf = Configuration()
    with pytest.raises(ConfigurationError) as info:
        conf.set_string(key, value)
    assert _message(info) == message
    assert key not in conf
    with pytest.raises(ConfigurationError):
        Configuration({key: value})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("execution.runtime-mode", "bogus", RUNTIME_MODE_ERROR),
        ("parallelism.default", "abc", PARALLELISM_ERROR),
        (
            "parallelism.default",
            "0",
            "Could not parse value '0' for 'parallelism.default': expected an integer >= 1",
        ),
        (
            "pipeline.max-parallelism",
            "40000",
            "Could not parse value '40000' for 'pipeline.max-parallelism': expected an integer "
            "between 1 and 32767",
        ),
        (
            "execution.savepoint.ignore-unclaimed-state",
            "maybe",
            "Could not parse value 'maybe' for 'execution.savepoint.ignore-unclaimed-state': "
            "expected 'true' or 'false'",
        ),
        (
            "sparkpoint.epoch.max-records-per-split",
            "lots",
            "Could not parse value 'lots' for 'sparkpoint.epoch.max-records-per-split': expected "
            "an integer >= 1",
        ),
    ],
)
def test_handed_to_the_environment(key: str, value: str, message: str) -> None:
    """A plain mapping is checked by the environment at creation and by configure()."""
    with pytest.raises(ConfigurationError) as info:
        StreamExecutionEnvironment({key: value})  # type: ignore[arg-type]
    assert _message(info) == message
    env = StreamExecutionEnvironment().set_parallelism(2)
    with pytest.raises(ConfigurationError) as info:
        env.configure({key: value, "execution.checkpointing.interval": "5 s"})
    assert _message(info) == message
    # Nothing of the rejected configuration was applied.
    assert env.get_parallelism() == 2
    assert env.get_checkpoint_interval() == -1
    assert key not in env._configuration


def test_runtime_mode_reaches_the_job_only_when_valid() -> None:
    env = StreamExecutionEnvironment({"execution.runtime-mode": "batch"})  # type: ignore[arg-type]
    assert env._settings("job").batch_mode is True
    with pytest.raises(
        ConfigurationError,
        match="'bogus' for 'RuntimeExecutionMode': expected one of STREAMING, BATCH, AUTOMATIC",
    ):
        env.set_runtime_mode("bogus")
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    assert env._settings("job").batch_mode is False


UNKNOWN_SCHEME = (
    "Could not parse value 'bogus://bucket/checkpoints' for '{key}': expected a path or URI of "
    "a known filesystem; scheme 'bogus' is unknown"
)


@pytest.mark.parametrize(
    "key",
    [
        "execution.checkpointing.dir",
        "state.checkpoints.dir",
        "execution.checkpointing.savepoint-dir",
        "state.savepoints.dir",
        "execution.state-recovery.path",
        "execution.savepoint.path",
    ],
)
def test_unknown_scheme_of_a_directory_in_the_configuration(key: str) -> None:
    """Refused when set on a ``Configuration``, and when a plain mapping reaches the
    environment or a ``CheckpointConfig``: long before any ``_metadata`` is written."""
    conf = Configuration()
    with pytest.raises(ConfigurationError) as info:
        conf.set_string(key, "bogus://bucket/checkpoints")
    assert _message(info).startswith(UNKNOWN_SCHEME.format(key=key))
    assert key not in conf
    with pytest.raises(ConfigurationError) as info:
        StreamExecutionEnvironment({key: "bogus://bucket/checkpoints"})  # type: ignore[arg-type]
    assert _message(info).startswith(UNKNOWN_SCHEME.format(key=key))
    if "checkpoints.dir" in key or key == "execution.checkpointing.dir":
        with pytest.raises(ConfigurationError, match="scheme 'bogus' is unknown"):
            CheckpointConfig({key: "bogus://bucket/checkpoints"})


@pytest.mark.parametrize(
    ("where", "make"),
    [
        ("checkpoint_path", lambda p: FileSystemCheckpointStorage(p)),
        ("checkpoint_path", lambda p: CheckpointConfig().set_checkpoint_storage_dir(p)),
        ("checkpoint_path", lambda p: FsStateBackend(p)),
        ("checkpoint_path", lambda p: RocksDBStateBackend(p)),
        ("directory", lambda p: StreamExecutionEnvironment().set_default_savepoint_directory(p)),
        (
            "execution.checkpointing.savepoint-dir",
            lambda p: StreamExecutionEnvironment().configure(
                Configuration().set_string("execution.checkpointing.savepoint-dir", p)
            ),
        ),
        (
            "execution.savepoint.path",
            lambda p: StreamExecutionEnvironment().configure(
                Configuration().set_string("execution.savepoint.path", p)
            ),
        ),
    ],
)
def test_unknown_scheme_is_refused_where_a_path_is_set(where: str, make: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        make("bogus://bucket/checkpoints")
    assert _message(info).startswith(UNKNOWN_SCHEME.format(key=where))


@pytest.mark.parametrize(
    "path",
    [
        "/tmp/ckpt",
        "file:///tmp/ckpt",
        "s3://bucket/ckpt",
        "s3a://bucket/ckpt",
        "s3n://bucket/ckpt",
        "gs://bucket/ckpt",
        "hdfs://nn:8020/ckpt",
        "memory://ckpt",
        "abfs://container/ckpt",
    ],
)
def test_known_schemes_are_accepted(path: str) -> None:
    assert FileSystemCheckpointStorage(path).get_checkpoint_path() == path
    conf = Configuration().set_string("execution.checkpointing.dir", path)
    storage = StreamExecutionEnvironment(conf).get_checkpoint_config().get_checkpoint_storage()
    assert storage is not None and storage.get_checkpoint_path() == path


def test_time_characteristic_is_checked_when_set() -> None:
    env = StreamExecutionEnvironment()
    with pytest.raises(ConfigurationError) as info:
        env.set_stream_time_characteristic("nonsense")
    assert _message(info) == (
        "Could not parse value 'nonsense' for 'TimeCharacteristic': expected one of "
        "ProcessingTime, IngestionTime, EventTime"
    )
    assert env.get_stream_time_characteristic() is TimeCharacteristic.EventTime
    # PyFlink 1.x int constants and the names are accepted.
    env.set_stream_time_characteristic(0)
    assert env.get_stream_time_characteristic() is TimeCharacteristic.ProcessingTime
    env.set_stream_time_characteristic("IngestionTime")
    assert env.get_stream_time_characteristic() is TimeCharacteristic.IngestionTime


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Configuration().set_integer("parallelism.default", "abc"), PARALLELISM_ERROR),
        (
            lambda: Configuration().set_integer("any.int", "abc"),
            "Could not parse value 'abc' for 'any.int': expected an integer",
        ),
        (
            lambda: Configuration().set_boolean("execution.checkpointing.unaligned.enabled", "x"),
            "Could not parse value 'x' for 'execution.checkpointing.unaligned.enabled': expected "
            "'true' or 'false'",
        ),
        (
            lambda: Configuration().set_float("any.float", "many"),
            "Could not parse value 'many' for 'any.float': expected a number",
        ),
        (
            lambda: StreamExecutionEnvironment().set_parallelism("x"),
            "Could not parse value 'x' for 'parallelism': expected an integer >= 1",
        ),
        (
            lambda: StreamExecutionEnvironment().set_parallelism(0),
            "Could not parse value 0 for 'parallelism': expected an integer >= 1",
        ),
        (
            lambda: StreamExecutionEnvironment().set_default_local_parallelism(0),
            "Could not parse value 0 for 'parallelism': expected an integer >= 1",
        ),
        (
            lambda: StreamExecutionEnvironment().set_buffer_timeout("x"),
            "Could not parse value 'x' for 'timeout_millis': expected an integer >= -1",
        ),
        (
            lambda: StreamExecutionEnvironment().set_buffer_timeout(-2),
            "Could not parse value -2 for 'timeout_millis': expected an integer >= -1",
        ),
        (
            lambda: CheckpointConfig().set_fail_on_checkpointing_errors("x"),
            "Could not parse value 'x' for 'fail_on_checkpointing_errors': expected 'true' or "
            "'false'",
        ),
        (
            lambda: CheckpointConfig().enable_unaligned_checkpoints("x"),
            "Could not parse value 'x' for 'enabled': expected 'true' or 'false'",
        ),
        (
            lambda: CheckpointConfig().set_force_unaligned_checkpoints("x"),
            "Could not parse value 'x' for 'force_unaligned_checkpoints': expected 'true' or "
            "'false'",
        ),
        (
            lambda: EmbeddedRocksDBStateBackend("x"),
            "Could not parse value 'x' for 'enable_incremental_checkpointing': expected 'true' or "
            "'false'",
        ),
    ],
)
def test_setter_refuses_a_bad_value(call: Any, message: str) -> None:
    """Setters that used to raise Python's own ``int()``/comparison errors, or to take any
    truthy value as ``True``, name the parameter, the value and what is allowed."""
    with pytest.raises(ConfigurationError) as info:
        call()
    assert _message(info) == message


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: RocksDBStateBackend(checkpoint_stream_backend="file:///tmp/c"),
            "checkpoint_stream_backend must be a StateBackend (MemoryStateBackend or "
            "FsStateBackend), got 'file:///tmp/c'",
        ),
        (lambda: Time.seconds("x"), "expected a whole number of seconds, got 'x'"),
        (lambda: Duration.of_minutes(1.5), "expected a whole number of minutes, got 1.5"),
    ],
)
def test_wrong_type_is_a_clear_type_error(call: Any, message: str) -> None:
    """Was ``AttributeError: 'str' object has no attribute 'get_checkpoint_storage'``, and a
    message holding the string repeated 1000 times."""
    with pytest.raises(TypeError) as info:
        call()
    assert str(info.value) == message
