"""CheckpointConfig: defaults, every method, every ValueError, Flink keys, warnings."""

from __future__ import annotations

import datetime
import warnings

import pytest

import sparkpoint.datastream.checkpoint_config as checkpoint_config_module
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.common.configuration import Configuration
from sparkpoint.common.time import Duration, Time
from sparkpoint.config import DURATION, CheckpointingOptions, ConfigOption
from sparkpoint.datastream.checkpoint_config import CheckpointConfig
from sparkpoint.datastream.checkpoint_config import (
    ExternalizedCheckpointCleanup as CleanupFromConfigModule,
)
from sparkpoint.datastream.checkpoint_storage import (
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)
from sparkpoint.datastream.checkpointing_mode import CheckpointingMode
from sparkpoint.datastream.externalized_checkpoint_retention import (
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
)


def test_constants() -> None:
    assert CheckpointConfig.DEFAULT_MODE is CheckpointingMode.EXACTLY_ONCE
    assert CheckpointConfig.DEFAULT_MODE.value == 0
    assert CheckpointConfig.DEFAULT_TIMEOUT == 600000
    assert CheckpointConfig.DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS == 0
    assert CheckpointConfig.DEFAULT_MAX_CONCURRENT_CHECKPOINTS == 1
    assert CheckpointConfig.DEFAULT_TOLERABLE_CHECKPOINT_FAILURE_NUMBER == 0
    assert CheckpointingMode.EXACTLY_ONCE.value == 0 and CheckpointingMode.AT_LEAST_ONCE.value == 1
    for enum in (ExternalizedCheckpointCleanup, ExternalizedCheckpointRetention):
        assert enum.DELETE_ON_CANCELLATION.value == 0
        assert enum.RETAIN_ON_CANCELLATION.value == 1
        assert enum.NO_EXTERNALIZED_CHECKPOINTS.value == 2
    assert CleanupFromConfigModule is ExternalizedCheckpointCleanup


def test_defaults() -> None:
    c = CheckpointConfig()
    assert not c.is_checkpointing_enabled()
    assert c.get_checkpoint_interval() == -1
    assert c.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE
    assert c.get_checkpointing_consistency_mode() is CheckpointingMode.EXACTLY_ONCE
    assert c.get_checkpoint_timeout() == 600000
    assert c.get_min_pause_between_checkpoints() == 0
    assert c.get_max_concurrent_checkpoints() == 1
    assert c.is_fail_on_checkpointing_errors() is True
    assert c.get_tolerable_checkpoint_failure_number() == 0
    assert not c.is_externalized_checkpoints_enabled()
    assert (
        c.get_externalized_checkpoint_retention()
        is ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
    )
    # Seed 002: "The cleanup behaviour for externalized checkpoints or None if none is
    # configured."
    assert c.get_externalized_checkpoint_cleanup() is None
    assert not c.is_unaligned_checkpoints_enabled()
    assert c.get_aligned_checkpoint_timeout() == Duration.of_millis(0)
    assert c.get_alignment_timeout() == Duration.of_millis(0)
    assert not c.is_force_unaligned_checkpoints()
    assert c.get_checkpoint_storage() is None
    assert c.get_num_retained_checkpoints() == 1
    assert not c.is_prefer_checkpoint_for_recovery()
    assert not c.is_approximate_local_recovery_enabled()
    assert c.get_checkpoint_id_of_ignored_in_flight_data() == -1
    assert c.is_checkpoints_after_tasks_finish_enabled()
    assert c.get_checkpoint_interval_during_backlog() == -1


def test_interval_in_ms_duration_time_and_timedelta() -> None:
    c = CheckpointConfig()
    assert c.set_checkpoint_interval(1000) is c
    assert c.is_checkpointing_enabled() and c.get_checkpoint_interval() == 1000
    c.set_checkpoint_interval(Duration.of_seconds(30))
    assert c.get_checkpoint_interval() == 30_000
    c.set_checkpoint_interval(Time.minutes(1))
    assert c.get_checkpoint_interval() == 60_000
    c.set_checkpoint_interval(datetime.timedelta(milliseconds=10))
    assert c.get_checkpoint_interval() == 10


@pytest.mark.parametrize("bad", [0, -1, 9, Duration.of_millis(-5)])
def test_interval_must_be_at_least_10ms(bad: object) -> None:
    c = CheckpointConfig()
    with pytest.raises(ValueError, match="interval must be larger than or equal to 10 ms"):
        c.set_checkpoint_interval(bad)  # type: ignore[arg-type]
    assert c.get_checkpoint_interval() == -1


def test_interval_type_error() -> None:
    with pytest.raises(TypeError, match="checkpoint_interval must be a Duration"):
        CheckpointConfig().set_checkpoint_interval("10s")  # type: ignore[arg-type]


def test_interval_during_backlog() -> None:
    c = CheckpointConfig().set_checkpoint_interval(1000)
    c.set_checkpoint_interval_during_backlog(Duration.of_seconds(5))
    assert c.get_checkpoint_interval_during_backlog() == 5000
    c.set_checkpoint_interval_during_backlog(0)
    assert c.get_checkpoint_interval_during_backlog() == 0
    with pytest.raises(ValueError, match="must be 0 or at least the checkpoint interval"):
        c.set_checkpoint_interval_during_backlog(500)
    with pytest.raises(ValueError, match="must be zero or larger than or equal to 10 ms"):
        c.set_checkpoint_interval_during_backlog(5)
    c.set_checkpoint_interval_during_backlog(2000)
    with pytest.raises(ValueError, match="must be 0 or at least the checkpoint interval"):
        c.set_checkpoint_interval(3000)


def test_mode_setters_and_2x_spelling() -> None:
    c = CheckpointConfig()
    assert c.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE) is c
    assert c.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    c.set_checkpointing_consistency_mode(CheckpointingMode.EXACTLY_ONCE)
    assert c.get_checkpointing_consistency_mode() is CheckpointingMode.EXACTLY_ONCE
    message = (
        "Could not parse value 'SOMETIMES' for 'CheckpointingMode': expected one of "
        "EXACTLY_ONCE, AT_LEAST_ONCE"
    )
    with pytest.raises(ValueError, match=message):
        c.set_checkpointing_mode("SOMETIMES")  # type: ignore[arg-type]


def test_timeout() -> None:
    c = CheckpointConfig()
    c.set_checkpoint_timeout(Duration.of_minutes(2))
    assert c.get_checkpoint_timeout() == 120_000
    c.set_checkpoint_timeout(10)
    assert c.get_checkpoint_timeout() == 10
    for bad in (-1, 0, 9):
        with pytest.raises(ValueError, match="timeout must be larger than or equal to 10 ms"):
            c.set_checkpoint_timeout(bad)


def test_min_pause() -> None:
    c = CheckpointConfig()
    c.set_min_pause_between_checkpoints(500)
    assert c.get_min_pause_between_checkpoints() == 500
    c.set_min_pause_between_checkpoints(Duration.of_seconds(1))
    assert c.get_min_pause_between_checkpoints() == 1000
    c.set_min_pause_between_checkpoints(0)
    with pytest.raises(ValueError, match="Pause value must be zero or positive, got -1 ms"):
        c.set_min_pause_between_checkpoints(-1)


def test_max_concurrent() -> None:
    c = CheckpointConfig()
    c.set_max_concurrent_checkpoints(3)
    assert c.get_max_concurrent_checkpoints() == 3
    for bad in (0, -2):
        with pytest.raises(ValueError, match="must be at least one"):
            c.set_max_concurrent_checkpoints(bad)
    with pytest.raises(TypeError, match="must be an int"):
        c.set_max_concurrent_checkpoints(1.5)  # type: ignore[arg-type]


def test_fail_on_checkpointing_errors_maps_to_tolerable() -> None:
    c = CheckpointConfig()
    c.set_fail_on_checkpointing_errors(False)
    assert c.get_tolerable_checkpoint_failure_number() == 2147483647
    assert not c.is_fail_on_checkpointing_errors()
    c.set_fail_on_checkpointing_errors(True)
    assert c.get_tolerable_checkpoint_failure_number() == 0
    assert c.is_fail_on_checkpointing_errors()
    c.set_tolerable_checkpoint_failure_number(3)
    assert c.get_tolerable_checkpoint_failure_number() == 3
    assert not c.is_fail_on_checkpointing_errors()
    with pytest.raises(ValueError, match="must be non-negative, got -1"):
        c.set_tolerable_checkpoint_failure_number(-1)


@pytest.mark.parametrize("enum", [ExternalizedCheckpointCleanup, ExternalizedCheckpointRetention])
def test_externalized_retention_all_spellings(enum: type) -> None:
    c = CheckpointConfig()
    c.enable_externalized_checkpoints(enum.RETAIN_ON_CANCELLATION)
    assert c.is_externalized_checkpoints_enabled()
    cleanup = c.get_externalized_checkpoint_cleanup()
    assert cleanup is ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION
    assert (
        c.get_externalized_checkpoint_retention()
        is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    c.set_externalized_checkpoint_cleanup(enum.DELETE_ON_CANCELLATION)
    retention = c.get_externalized_checkpoint_retention()
    assert retention is ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION
    c.set_externalized_checkpoint_retention(enum.NO_EXTERNALIZED_CHECKPOINTS)
    assert not c.is_externalized_checkpoints_enabled()


def test_externalized_retention_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="'KEEP' for 'ExternalizedCheckpointRetention'"):
        CheckpointConfig().set_externalized_checkpoint_retention("KEEP")  # type: ignore[arg-type]


def test_retention_maps_to_checkpoint_properties() -> None:
    c = CheckpointConfig()
    assert (
        CheckpointProperties.for_checkpoint(c.get_externalized_checkpoint_retention())
        is CheckpointProperties.NEVER_RETAIN_AFTER_TERMINATION
    )
    c.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION)
    assert (
        CheckpointProperties.for_checkpoint(c.get_externalized_checkpoint_retention())
        is CheckpointProperties.RETAIN_ON_FAILURE
    )
    c.enable_externalized_checkpoints(ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION)
    assert (
        CheckpointProperties.for_checkpoint(c.get_externalized_checkpoint_cleanup())
        is CheckpointProperties.RETAIN_ON_CANCELLATION
    )


def test_num_retained() -> None:
    c = CheckpointConfig()
    c.set_num_retained_checkpoints(3)
    assert c.get_num_retained_checkpoints() == 3
    with pytest.raises(ValueError, match="num-retained must be at least 1, got 0"):
        c.set_num_retained_checkpoints(0)


def test_unaligned_settings() -> None:
    c = CheckpointConfig()
    assert c.enable_unaligned_checkpoints() is c
    assert c.is_unaligned_checkpoints_enabled()
    c.disable_unaligned_checkpoints()
    assert not c.is_unaligned_checkpoints_enabled()
    c.set_unaligned_checkpoints_enabled(True)
    assert c.is_unaligned_checkpoints_enabled()
    c.enable_unaligned_checkpoints(False)
    assert not c.is_unaligned_checkpoints_enabled()
    c.set_aligned_checkpoint_timeout(Duration.of_seconds(3))
    assert c.get_aligned_checkpoint_timeout() == Duration.of_seconds(3)
    c.set_alignment_timeout(Duration.of_millis(250))
    assert c.get_alignment_timeout() == Duration.of_millis(250)
    assert c.get_aligned_checkpoint_timeout() == Duration.of_millis(250)
    with pytest.raises(ValueError, match="must not be negative"):
        c.set_aligned_checkpoint_timeout(Duration.of_millis(-1))
    c.set_force_unaligned_checkpoints()
    assert c.is_force_unaligned_checkpoints()
    c.set_force_unaligned_checkpoints(False)
    assert not c.is_force_unaligned_checkpoints()


def test_unaligned_requires_exactly_once_both_orders() -> None:
    c = CheckpointConfig().set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    with pytest.raises(ValueError, match=r"only supported with CheckpointingMode\.EXACTLY_ONCE"):
        c.enable_unaligned_checkpoints()
    assert not c.is_unaligned_checkpoints_enabled()
    c = CheckpointConfig().enable_unaligned_checkpoints()
    with pytest.raises(ValueError, match=r"only supported with CheckpointingMode\.EXACTLY_ONCE"):
        c.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    assert c.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE


def test_unaligned_requires_single_concurrent_checkpoint_both_orders() -> None:
    c = CheckpointConfig().set_max_concurrent_checkpoints(2)
    with pytest.raises(ValueError, match="max concurrent checkpoints of 1 \\(got 2\\)"):
        c.enable_unaligned_checkpoints()
    c = CheckpointConfig().enable_unaligned_checkpoints()
    with pytest.raises(ValueError, match="can't be > 1 if unaligned checkpoints are enabled"):
        c.set_max_concurrent_checkpoints(3)
    assert c.get_max_concurrent_checkpoints() == 1


def test_checkpoint_storage_object_and_dir(tmp_path) -> None:  # type: ignore[no-untyped-def]
    c = CheckpointConfig()
    storage = JobManagerCheckpointStorage()
    assert c.set_checkpoint_storage(storage) is c
    assert c.get_checkpoint_storage() is storage
    c.set_checkpoint_storage_dir(str(tmp_path))
    fs_storage = c.get_checkpoint_storage()
    assert isinstance(fs_storage, FileSystemCheckpointStorage)
    assert fs_storage.get_checkpoint_path() == str(tmp_path)
    with pytest.raises(TypeError, match="expects a CheckpointStorage"):
        c.set_checkpoint_storage(str(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty path"):
        c.set_checkpoint_storage_dir("")


def test_prefer_checkpoint_for_recovery_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_config_module, "_PREFER_CHECKPOINT_WARNED", False)
    c = CheckpointConfig()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c.set_prefer_checkpoint_for_recovery(True)
        CheckpointConfig().set_prefer_checkpoint_for_recovery(True)
        c.set_prefer_checkpoint_for_recovery(False)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "can lead to data loss and duplicate outputs" in message
    assert "removed it in 1.14" in message
    assert caught[0].filename == __file__
    assert c.is_prefer_checkpoint_for_recovery() is False
    c.set_prefer_checkpoint_for_recovery(True)
    assert c.is_prefer_checkpoint_for_recovery() is True


def test_prefer_false_does_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_config_module, "_PREFER_CHECKPOINT_WARNED", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CheckpointConfig().set_prefer_checkpoint_for_recovery(False)
    assert caught == []


def test_recovery_settings() -> None:
    c = CheckpointConfig()
    c.enable_approximate_local_recovery(True)
    assert c.is_approximate_local_recovery_enabled()
    c.set_checkpoint_id_of_ignored_in_flight_data(12)
    assert c.get_checkpoint_id_of_ignored_in_flight_data() == 12
    c.enable_checkpoints_after_tasks_finish(False)
    assert not c.is_checkpoints_after_tasks_finish_enabled()


def test_configure_from_current_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = Configuration()
    conf.set_string("execution.checkpointing.interval", "30 s")
    conf.set_string("execution.checkpointing.mode", "AT_LEAST_ONCE")
    conf.set_string("execution.checkpointing.timeout", "5 min")
    conf.set_string("execution.checkpointing.min-pause", "500 ms")
    conf.set_integer("execution.checkpointing.max-concurrent-checkpoints", 2)
    conf.set_integer("execution.checkpointing.tolerable-failed-checkpoints", 4)
    conf.set_integer("execution.checkpointing.num-retained", 3)
    conf.set_string(
        "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION"
    )
    conf.set_string("execution.checkpointing.aligned-checkpoint-timeout", "2 s")
    conf.set_boolean("execution.checkpointing.unaligned.forced", True)
    conf.set_boolean("execution.checkpointing.checkpoints-after-tasks-finish", False)
    conf.set_string("execution.checkpointing.interval-during-backlog", "1 min")
    conf.set_string("execution.checkpointing.dir", str(tmp_path))
    conf.set_string("execution.checkpointing.savepoint-dir", str(tmp_path / "sp"))
    c = CheckpointConfig()
    assert c.configure(conf) is c
    assert c.get_checkpoint_interval() == 30_000
    assert c.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert c.get_checkpoint_timeout() == 300_000
    assert c.get_min_pause_between_checkpoints() == 500
    assert c.get_max_concurrent_checkpoints() == 2
    assert c.get_tolerable_checkpoint_failure_number() == 4
    assert c.get_num_retained_checkpoints() == 3
    assert (
        c.get_externalized_checkpoint_retention()
        is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    assert c.get_aligned_checkpoint_timeout() == Duration.of_seconds(2)
    assert c.is_force_unaligned_checkpoints()
    assert not c.is_checkpoints_after_tasks_finish_enabled()
    assert c.get_checkpoint_interval_during_backlog() == 60_000
    storage = c.get_checkpoint_storage()
    assert isinstance(storage, FileSystemCheckpointStorage)
    assert storage.get_checkpoint_path() == str(tmp_path)
    assert storage.get_savepoint_path() == str(tmp_path / "sp")


def test_configure_from_deprecated_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    c = CheckpointConfig(
        {
            "execution.checkpointing.interval": "1000",
            "execution.checkpointing.unaligned": "true",
            "execution.checkpointing.alignment-timeout": "100 ms",
            "state.checkpoints.num-retained": "5",
            "state.checkpoints.dir": str(tmp_path),
            "state.checkpoint-storage": "filesystem",
            "execution.checkpointing.recover-without-channel-state.checkpoint-id": "9",
            "execution.checkpointing.approximate-local-recovery": "true",
        }
    )
    assert c.get_checkpoint_interval() == 1000
    assert c.is_unaligned_checkpoints_enabled()
    assert c.get_alignment_timeout() == Duration.of_millis(100)
    assert c.get_num_retained_checkpoints() == 5
    assert c.get_checkpoint_id_of_ignored_in_flight_data() == 9
    assert c.is_approximate_local_recovery_enabled()
    storage = c.get_checkpoint_storage()
    assert isinstance(storage, FileSystemCheckpointStorage)
    assert storage.get_checkpoint_path() == str(tmp_path)


def test_new_key_wins_over_deprecated() -> None:
    c = CheckpointConfig(
        {"execution.checkpointing.num-retained": "2", "state.checkpoints.num-retained": "7"}
    )
    assert c.get_num_retained_checkpoints() == 2


def test_configure_jobmanager_storage() -> None:
    c = CheckpointConfig({"execution.checkpointing.storage": "jobmanager"})
    assert isinstance(c.get_checkpoint_storage(), JobManagerCheckpointStorage)


def test_configure_errors_leave_config_unchanged() -> None:
    c = CheckpointConfig().set_checkpoint_interval(5000)
    bad_inputs = [
        ({"execution.checkpointing.interval": "5 ms"}, "expected a duration of at least 10 ms"),
        ({"execution.checkpointing.interval": "soon"}, "Could not parse value 'soon'"),
        ({"execution.checkpointing.timeout": "1 ms"}, "Checkpoint timeout"),
        (
            {"execution.checkpointing.min-pause": "1 s", "execution.checkpointing.mode": "X"},
            "'X' for 'execution.checkpointing.mode': expected one of EXACTLY_ONCE, AT_LEAST_ONCE",
        ),
        ({"execution.checkpointing.max-concurrent-checkpoints": "0"}, "an integer >= 1"),
        ({"execution.checkpointing.tolerable-failed-checkpoints": "-3"}, "an integer >= 0"),
        ({"execution.checkpointing.num-retained": "zero"}, "expected an integer"),
        (
            {
                "execution.checkpointing.unaligned.enabled": "true",
                "execution.checkpointing.mode": "AT_LEAST_ONCE",
            },
            "EXACTLY_ONCE",
        ),
        (
            {
                "execution.checkpointing.unaligned.enabled": "true",
                "execution.checkpointing.max-concurrent-checkpoints": "2",
            },
            "can't be > 1",
        ),
        ({"execution.checkpointing.storage": "filesystem"}, "no checkpoint directory"),
        (
            {"execution.checkpointing.storage": "rocks"},
            "'rocks' for 'execution.checkpointing.storage': expected one of jobmanager, filesystem",
        ),
        (
            {"execution.checkpointing.externalized-checkpoint-retention": "KEEP"},
            "'KEEP' for 'execution.checkpointing.externalized-checkpoint-retention'",
        ),
    ]
    for conf, message in bad_inputs:
        before = c.to_dict()
        with pytest.raises(ValueError, match=message):
            c.configure(conf)
        assert c.to_dict() == before, conf


def test_unaligned_with_mode_change_in_one_configure() -> None:
    c = CheckpointConfig().enable_unaligned_checkpoints()
    c.configure(
        {
            "execution.checkpointing.unaligned.enabled": "false",
            "execution.checkpointing.mode": "AT_LEAST_ONCE",
        }
    )
    assert c.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert not c.is_unaligned_checkpoints_enabled()


def test_to_dict_round_trips_through_configure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    c = (
        CheckpointConfig()
        .set_checkpoint_interval(Duration.of_seconds(10))
        .set_checkpoint_timeout(60_000)
        .set_min_pause_between_checkpoints(100)
        .set_tolerable_checkpoint_failure_number(2)
        .set_externalized_checkpoint_retention(ExternalizedCheckpointRetention(0))
        .enable_unaligned_checkpoints()
        .set_aligned_checkpoint_timeout(Duration.of_millis(30))
        .set_num_retained_checkpoints(4)
        .set_checkpoint_storage_dir(str(tmp_path))
    )
    d = c.to_dict()
    assert d["execution.checkpointing.interval"] == "10 s"
    assert d["execution.checkpointing.mode"] == "EXACTLY_ONCE"
    assert d["execution.checkpointing.unaligned.enabled"] == "true"
    retention_key = "execution.checkpointing.externalized-checkpoint-retention"
    assert d[retention_key] == "DELETE_ON_CANCELLATION"
    assert d["execution.checkpointing.dir"] == str(tmp_path)
    rebuilt = CheckpointConfig(d)
    assert rebuilt.to_dict() == d
    assert "execution.checkpointing.interval" not in CheckpointConfig().to_dict()


def test_copy_and_equality() -> None:
    a = CheckpointConfig().set_checkpoint_interval(100)
    b = a.copy()
    assert a == b
    b.set_checkpoint_timeout(20)
    assert a != b
    assert "execution.checkpointing.interval" in repr(a)


def test_options_table() -> None:
    keys = {o.key: o for o in CheckpointingOptions.all_options()}
    expected_defaults = {
        "execution.checkpointing.interval": None,
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.timeout": 600_000,
        "execution.checkpointing.min-pause": 0,
        "execution.checkpointing.max-concurrent-checkpoints": 1,
        "execution.checkpointing.tolerable-failed-checkpoints": 0,
        "execution.checkpointing.num-retained": 1,
        "execution.checkpointing.externalized-checkpoint-retention": "NO_EXTERNALIZED_CHECKPOINTS",
        "execution.checkpointing.unaligned.enabled": False,
        "execution.checkpointing.aligned-checkpoint-timeout": 0,
        "execution.checkpointing.unaligned.forced": False,
        "execution.checkpointing.dir": None,
        "execution.checkpointing.savepoint-dir": None,
        "execution.checkpointing.data-inline-threshold": 20 * 1024,
        "execution.checkpointing.write-buffer-size": 4096,
        "execution.checkpointing.create-subdir": True,
        "execution.checkpointing.incremental": False,
        "execution.checkpointing.storage": None,
        "execution.checkpointing.checkpoints-after-tasks-finish": True,
        "execution.checkpointing.interval-during-backlog": None,
        "execution.checkpointing.cleaner.parallel-mode": True,
    }
    for key, default in expected_defaults.items():
        assert keys[key].default == default, key
    deprecated = {o.key: o.deprecated_keys for o in keys.values()}
    assert deprecated["execution.checkpointing.num-retained"] == ("state.checkpoints.num-retained",)
    assert deprecated["execution.checkpointing.dir"] == ("state.checkpoints.dir",)
    assert deprecated["execution.checkpointing.savepoint-dir"] == ("state.savepoints.dir",)
    assert deprecated["execution.checkpointing.incremental"] == ("state.backend.incremental",)
    assert deprecated["execution.checkpointing.storage"] == ("state.checkpoint-storage",)
    assert deprecated["execution.checkpointing.create-subdir"] == (
        "state.checkpoints.create-subdir",
    )
    assert deprecated["execution.checkpointing.unaligned.enabled"] == (
        "execution.checkpointing.unaligned",
    )
    assert deprecated["execution.checkpointing.aligned-checkpoint-timeout"] == (
        "execution.checkpointing.alignment-timeout",
    )
    assert (
        "state.backend.fs.memory-threshold"
        in deprecated["execution.checkpointing.data-inline-threshold"]
    )
    opt = keys["execution.checkpointing.data-inline-threshold"]
    assert opt.read({"state.backend.fs.memory-threshold": "1kb"}) == 1024
    assert opt.read({}) == 20 * 1024
    timeout = keys["execution.checkpointing.timeout"]
    assert timeout.read({"execution.checkpointing.timeout": "1h"}) == 3_600_000
    with pytest.raises(ValueError, match="Could not parse value 'soon' for 'k'"):
        ConfigOption("k", DURATION, None, "a duration").read({"k": "soon"})


def test_pyflink_1x_int_constants_still_compare_equal() -> None:
    assert CheckpointConfig.DEFAULT_MODE == 0
    assert CheckpointingMode.AT_LEAST_ONCE == 1
    assert ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION == 1
    c = CheckpointConfig().set_checkpointing_mode(1)  # type: ignore[arg-type]
    assert c.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    c.set_externalized_checkpoint_retention(0)  # type: ignore[arg-type]
    assert (
        c.get_externalized_checkpoint_retention()
        is ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION
    )
