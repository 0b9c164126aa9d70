"""RestartStrategies configurations, Flink-key parsing and the restart backoff decisions."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from sparkpoint.common.configuration import Configuration
from sparkpoint.common.restart_strategy import (
    INFINITE_ATTEMPTS,
    RestartStrategies,
    RestartStrategyConfiguration,
    from_configuration,
)
from sparkpoint.common.time import Duration, Time
from sparkpoint.runtime.driver.restart import (
    ExponentialDelayRestartBackoffTimeStrategy,
    FailureRateRestartBackoffTimeStrategy,
    FixedDelayRestartBackoffTimeStrategy,
    NoRestartBackoffTimeStrategy,
    create_restart_backoff_strategy,
)
from sparkpoint.testing import ManualClock

# ---- configurations ------------------------------------------------------------------------


def test_no_restart_and_fallback_are_values() -> None:
    assert RestartStrategies.no_restart() == RestartStrategies.no_restart()
    assert RestartStrategies.fall_back_restart() == RestartStrategies.fall_back_restart()
    assert RestartStrategies.no_restart() != RestartStrategies.fall_back_restart()
    assert hash(RestartStrategies.no_restart()) == hash(RestartStrategies.no_restart())
    assert RestartStrategies.no_restart().get_description() == "Restart deactivated."
    assert (
        RestartStrategies.fall_back_restart().get_description()
        == "Cluster level default restart strategy"
    )


def test_fixed_delay_accepts_ms_timedelta_duration_time() -> None:
    for delay in (10_000, timedelta(seconds=10), Duration.of_seconds(10), Time.seconds(10)):
        config = RestartStrategies.fixed_delay_restart(3, delay)
        assert isinstance(config, RestartStrategies.FixedDelayRestartStrategyConfiguration)
        assert config.get_restart_attempts() == 3
        assert config.get_delay_between_attempts_interval() == timedelta(seconds=10)
    fixed = RestartStrategies.fixed_delay_restart
    assert fixed(3, 10_000) == fixed(3, timedelta(seconds=10))
    assert fixed(3, 10_000) != fixed(4, 10_000)
    assert (
        RestartStrategies.fixed_delay_restart(3, 10_000).get_description()
        == "Restart with fixed delay (10 s). #3 restart attempts."
    )


def test_fixed_delay_validates() -> None:
    with pytest.raises(TypeError, match="delay_between_attempts_interval"):
        RestartStrategies.fixed_delay_restart(3, "10 s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="restart_attempts"):
        RestartStrategies.fixed_delay_restart(-1, 10)
    with pytest.raises(ValueError, match="must not be negative"):
        RestartStrategies.fixed_delay_restart(1, -5)


def test_failure_rate_configuration() -> None:
    config = RestartStrategies.failure_rate_restart(5, timedelta(minutes=5), 10_000)
    assert config.get_max_failure_rate() == 5
    assert config.get_failure_interval() == timedelta(minutes=5)
    assert config.get_delay_between_attempts_interval() == timedelta(seconds=10)
    assert config.get_description() == (
        "Failure rate restart with maximum of 5 failures within interval 5 min "
        "and fixed delay 10 s."
    )
    with pytest.raises(ValueError, match="max_failure_rate"):
        RestartStrategies.failure_rate_restart(0, 1000, 10)
    with pytest.raises(ValueError, match="failure_interval"):
        RestartStrategies.failure_rate_restart(1, 0, 10)
    with pytest.raises(TypeError, match="failure_interval"):
        RestartStrategies.failure_rate_restart(1, 1.5, 10)  # type: ignore[arg-type]


def test_exponential_delay_configuration_and_validation() -> None:
    config = RestartStrategies.exponential_delay_restart(
        timedelta(milliseconds=10), timedelta(seconds=1), 2.0, timedelta(seconds=2), 0.1
    )
    assert config.get_initial_backoff() == timedelta(milliseconds=10)
    assert config.get_max_backoff() == timedelta(seconds=1)
    assert config.get_backoff_multiplier() == 2.0
    assert config.get_reset_backoff_threshold() == timedelta(seconds=2)
    assert config.get_jitter_factor() == 0.1
    assert config.get_attempts_before_reset_backoff() == INFINITE_ATTEMPTS
    with pytest.raises(ValueError, match="Initial backoff cannot be higher"):
        RestartStrategies.exponential_delay_restart(2000, 1000, 2.0, 1000, 0.0)
    with pytest.raises(ValueError, match="multiplier"):
        RestartStrategies.exponential_delay_restart(10, 1000, 1.0, 1000, 0.0)
    with pytest.raises(ValueError, match="Jitter"):
        RestartStrategies.exponential_delay_restart(10, 1000, 2.0, 1000, 1.5)
    with pytest.raises(ValueError, match="at least 1"):
        RestartStrategies.exponential_delay_restart(0, 1000, 2.0, 1000, 0.0)


def test_configuration_base_is_abstract() -> None:
    with pytest.raises(TypeError):
        RestartStrategyConfiguration()  # type: ignore[abstract]


# ---- Flink keys ----------------------------------------------------------------------------


def test_from_configuration_absent_is_none() -> None:
    assert from_configuration({}) is None
    assert RestartStrategies.from_configuration({"parallelism.default": "2"}) is None


@pytest.mark.parametrize("value", ["none", "off", "disable", "NONE"])
def test_from_configuration_no_restart(value: str) -> None:
    assert from_configuration({"restart-strategy.type": value}) == RestartStrategies.no_restart()


@pytest.mark.parametrize("value", ["fixed-delay", "fixeddelay"])
def test_from_configuration_fixed_delay(value: str) -> None:
    config = from_configuration(
        {
            "restart-strategy.type": value,
            "restart-strategy.fixed-delay.attempts": "3",
            "restart-strategy.fixed-delay.delay": "10 s",
        }
    )
    assert config == RestartStrategies.fixed_delay_restart(3, 10_000)


def test_from_configuration_fixed_delay_defaults_and_deprecated_key() -> None:
    config = from_configuration(Configuration({"restart-strategy": "fixed-delay"}))
    assert config == RestartStrategies.fixed_delay_restart(1, 1000)


@pytest.mark.parametrize("value", ["failure-rate", "failurerate"])
def test_from_configuration_failure_rate(value: str) -> None:
    config = from_configuration(
        {
            "restart-strategy.type": value,
            "restart-strategy.failure-rate.max-failures-per-interval": 3,
            "restart-strategy.failure-rate.failure-rate-interval": "5 min",
            "restart-strategy.failure-rate.delay": "10 s",
        }
    )
    assert config == RestartStrategies.failure_rate_restart(3, 300_000, 10_000)
    defaults = from_configuration({"restart-strategy.type": value})
    assert defaults == RestartStrategies.failure_rate_restart(1, 60_000, 1000)


@pytest.mark.parametrize("value", ["exponential-delay", "exponentialdelay"])
def test_from_configuration_exponential_delay(value: str) -> None:
    config = from_configuration(
        {
            "restart-strategy.type": value,
            "restart-strategy.exponential-delay.initial-backoff": "10 ms",
            "restart-strategy.exponential-delay.max-backoff": "2 min",
            "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
            "restart-strategy.exponential-delay.reset-backoff-threshold": "10 min",
            "restart-strategy.exponential-delay.jitter-factor": "0.2",
            "restart-strategy.exponential-delay.attempts-before-reset-backoff": "7",
        }
    )
    assert isinstance(config, RestartStrategies.ExponentialDelayRestartStrategyConfiguration)
    assert config.get_initial_backoff() == timedelta(milliseconds=10)
    assert config.get_max_backoff() == timedelta(minutes=2)
    assert config.get_backoff_multiplier() == 2.0
    assert config.get_reset_backoff_threshold() == timedelta(minutes=10)
    assert config.get_jitter_factor() == 0.2
    assert config.get_attempts_before_reset_backoff() == 7


def test_from_configuration_exponential_defaults_are_flink_1_19() -> None:
    config = from_configuration({"restart-strategy.type": "exponential-delay"})
    assert isinstance(config, RestartStrategies.ExponentialDelayRestartStrategyConfiguration)
    assert config.get_initial_backoff() == timedelta(seconds=1)
    assert config.get_max_backoff() == timedelta(minutes=1)
    assert config.get_backoff_multiplier() == 1.5
    assert config.get_reset_backoff_threshold() == timedelta(hours=1)
    assert config.get_jitter_factor() == 0.1
    assert config.get_attempts_before_reset_backoff() == INFINITE_ATTEMPTS


def test_from_configuration_bad_values_name_the_key() -> None:
    with pytest.raises(ValueError, match=r"'sometimes' for 'restart-strategy\.type': expected"):
        from_configuration({"restart-strategy.type": "sometimes"})
    with pytest.raises(ValueError, match=r"restart-strategy\.fixed-delay\.attempts"):
        from_configuration(
            {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "x"}
        )
    with pytest.raises(ValueError, match=r"restart-strategy\.fixed-delay\.delay"):
        from_configuration(
            {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "10 q"}
        )


# ---- backoff decisions -----------------------------------------------------------------------


def test_no_restart_never() -> None:
    strategy = create_restart_backoff_strategy(RestartStrategies.no_restart())
    assert isinstance(strategy, NoRestartBackoffTimeStrategy)
    strategy.notify_failure(RuntimeError("boom"))
    assert strategy.can_restart() is False


def test_fixed_delay_three_attempts_then_refused() -> None:
    strategy = create_restart_backoff_strategy(RestartStrategies.fixed_delay_restart(3, 250))
    assert isinstance(strategy, FixedDelayRestartBackoffTimeStrategy)
    for attempt in range(1, 4):
        assert strategy.notify_failure(RuntimeError(f"failure {attempt}")) is True
        assert strategy.can_restart() is True
        assert strategy.get_backoff_time_ms() == 250
    strategy.notify_failure(RuntimeError("failure 4"))
    assert strategy.can_restart() is False


def test_fixed_delay_zero_attempts_refuses_first_failure() -> None:
    strategy = FixedDelayRestartBackoffTimeStrategy(0, 0)
    assert strategy.can_restart() is True
    strategy.notify_failure(None)
    assert strategy.can_restart() is False


def test_failure_rate_sliding_window() -> None:
    clock = ManualClock(0)
    strategy = create_restart_backoff_strategy(
        RestartStrategies.failure_rate_restart(2, 1000, 50), clock=clock
    )
    assert isinstance(strategy, FailureRateRestartBackoffTimeStrategy)
    assert strategy.get_backoff_time_ms() == 50
    strategy.notify_failure(None)  # t=0
    clock.ms = 400
    strategy.notify_failure(None)  # t=400
    assert strategy.can_restart() is True  # 2 failures within 1 s are tolerated
    clock.ms = 900
    strategy.notify_failure(None)  # third failure within 1 s of the first
    assert strategy.can_restart() is False
    clock.ms = 1000  # exactly the interval after the first failure: still refused
    assert strategy.can_restart() is False
    clock.ms = 1001  # the first failure left the window
    assert strategy.can_restart() is True
    clock.ms = 1300
    strategy.notify_failure(None)  # failures at 400, 900, 1300 -> within 1 s
    assert strategy.can_restart() is False
    clock.ms = 2500
    strategy.notify_failure(None)  # failures at 900, 1300, 2500 -> span 1600 ms
    assert strategy.can_restart() is True


def test_failure_rate_uses_given_timestamps() -> None:
    clock = ManualClock(10_000)
    strategy = FailureRateRestartBackoffTimeStrategy(1, 1000, 0, clock=clock)
    strategy.notify_failure(None, timestamp_ms=9_500)
    assert strategy.can_restart() is True
    strategy.notify_failure(None, timestamp_ms=9_800)
    assert strategy.can_restart() is False  # two failures within 1 s of now
    clock.ms = 10_501
    assert strategy.can_restart() is True


def _exponential(
    clock: ManualClock, **kwargs: object
) -> ExponentialDelayRestartBackoffTimeStrategy:
    params: dict[str, object] = {
        "initial_backoff_ms": 10,
        "max_backoff_ms": 100,
        "backoff_multiplier": 2.0,
        "reset_backoff_threshold_ms": 1000,
        "jitter_factor": 0.0,
    }
    params.update(kwargs)
    return ExponentialDelayRestartBackoffTimeStrategy(clock=clock, **params)  # type: ignore[arg-type]


def test_exponential_growth_cap_merge_and_reset() -> None:
    clock = ManualClock(0)
    strategy = _exponential(clock)
    with pytest.raises(RuntimeError, match="notify_failure"):
        strategy.get_backoff_time_ms()
    assert strategy.notify_failure(None) is True
    assert strategy.get_backoff_time_ms() == 10
    clock.ms = 5  # before the scheduled restart: merged into the same attempt
    assert strategy.notify_failure(None) is False
    assert strategy.current_restart_attempt == 1
    assert strategy.get_backoff_time_ms() == 5  # remaining time to the scheduled restart
    observed = []
    for now in (20, 50, 100, 200, 400):
        clock.ms = now
        assert strategy.notify_failure(None) is True
        observed.append(strategy.get_backoff_time_ms())
        assert strategy.can_restart() is True
    assert observed == [20, 40, 80, 100, 100]  # doubled, then capped at max
    # Last restart was scheduled at 500; running 1000 ms past it without failure resets.
    clock.ms = 1_499
    strategy.notify_failure(None)
    assert strategy.get_backoff_time_ms() == 100
    clock.ms = 1_599 + 1_000
    strategy.notify_failure(None)
    assert strategy.get_backoff_time_ms() == 10
    assert strategy.current_restart_attempt == 1
    clock.ms = 2_700
    assert strategy.get_backoff_time_ms() == 0


def test_exponential_attempts_before_reset_backoff() -> None:
    clock = ManualClock(0)
    strategy = _exponential(clock, attempts_before_reset_backoff=2)
    strategy.notify_failure(None)
    clock.ms = 20
    strategy.notify_failure(None)
    assert strategy.can_restart() is True
    clock.ms = 50
    strategy.notify_failure(None)
    assert strategy.can_restart() is False


def test_exponential_jitter_matches_seeded_rng_exactly() -> None:
    clock = ManualClock(0)
    strategy = _exponential(
        clock,
        initial_backoff_ms=1000,
        max_backoff_ms=60_000,
        jitter_factor=0.1,
        rng=random.Random(7),
    )
    reference = random.Random(7)
    for _ in range(20):
        clock.ms += 2_000_000  # always past the reset threshold: attempt 0 every time
        strategy.notify_failure(None)
        expected = max(1000, min(1000 + reference.randint(-100, 100), 60_000))
        assert strategy.get_backoff_time_ms() == expected
        assert 1000 <= expected <= 1100


def test_exponential_jitter_is_taken_before_the_cap() -> None:
    clock = ManualClock(0)
    strategy = _exponential(
        clock,
        initial_backoff_ms=1,
        max_backoff_ms=10,
        reset_backoff_threshold_ms=10**9,
        jitter_factor=0.5,
        rng=random.Random(1),
    )
    for _ in range(12):
        clock.ms += 11
        strategy.notify_failure(None)
    # attempt 11: 1 * 2**11 = 2048 +- 1024 is always above the cap of 10.
    assert strategy.get_backoff_time_ms() == 10


def test_exponential_validates() -> None:
    clock = ManualClock(0)
    with pytest.raises(ValueError, match="Initial backoff cannot be higher"):
        _exponential(clock, initial_backoff_ms=200)
    with pytest.raises(ValueError, match="Jitter"):
        _exponential(clock, jitter_factor=-0.1)
    with pytest.raises(ValueError, match="attemptsBeforeResetBackoff"):
        _exponential(clock, attempts_before_reset_backoff=0)


def test_create_from_exponential_configuration() -> None:
    clock = ManualClock(0)
    config = RestartStrategies.exponential_delay_restart(10, 100, 2.0, 1000, 0.0)
    strategy = create_restart_backoff_strategy(config, clock=clock)
    assert isinstance(strategy, ExponentialDelayRestartBackoffTimeStrategy)
    strategy.notify_failure(None)
    assert strategy.get_backoff_time_ms() == 10


def test_fallback_with_checkpointing_is_fixed_delay_forever_1s() -> None:
    strategy = create_restart_backoff_strategy(
        RestartStrategies.fall_back_restart(), checkpointing_enabled=True
    )
    assert isinstance(strategy, FixedDelayRestartBackoffTimeStrategy)
    assert strategy.get_backoff_time_ms() == 1000
    for _ in range(1000):
        strategy.notify_failure(None)
    assert strategy.can_restart() is True
    assert repr(strategy) == (
        "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=2147483647, "
        "backoffTimeMS=1000)"
    )


def test_fallback_or_none_without_checkpointing_is_no_restart() -> None:
    assert isinstance(
        create_restart_backoff_strategy(RestartStrategies.fall_back_restart()),
        NoRestartBackoffTimeStrategy,
    )
    assert isinstance(create_restart_backoff_strategy(None), NoRestartBackoffTimeStrategy)


def test_fallback_uses_cluster_configuration_first() -> None:
    strategy = create_restart_backoff_strategy(
        RestartStrategies.fall_back_restart(),
        checkpointing_enabled=True,
        cluster_config={
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "2",
            "restart-strategy.fixed-delay.delay": "3 s",
        },
    )
    assert isinstance(strategy, FixedDelayRestartBackoffTimeStrategy)
    assert strategy.get_backoff_time_ms() == 3000
    strategy.notify_failure(None)
    strategy.notify_failure(None)
    assert strategy.can_restart() is True
    strategy.notify_failure(None)
    assert strategy.can_restart() is False


def test_create_from_flink_keys_mapping() -> None:
    strategy = create_restart_backoff_strategy({"restart-strategy.type": "none"})
    assert isinstance(strategy, NoRestartBackoffTimeStrategy)
