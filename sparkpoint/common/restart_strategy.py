"""``RestartStrategies`` and their configurations (``pyflink.common.restart_strategy``).

Configurations are immutable values; ``sparkpoint.runtime.driver.restart`` turns one into the
decision logic the job master uses. ``from_configuration`` reads Flink's
``restart-strategy.*`` keys. Delays accept int milliseconds, ``timedelta``, ``Duration`` or
``Time``; getters return ``timedelta`` as PyFlink's do.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sparkpoint.common.time import Duration, Time
from sparkpoint.config import INFINITE_ATTEMPTS, format_duration_ms
from sparkpoint.config import RestartStrategyOptions as _Opt

__all__ = [
    "INFINITE_ATTEMPTS",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "from_configuration",
]

_Interval = int | timedelta | Duration | Time


def _millis(value: object, name: str) -> int:
    if isinstance(value, (Duration, Time)):
        return value.to_milliseconds()
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(
        f"The parameter '{name}' only supports integer (milliseconds), datetime.timedelta, "
        f"Duration and Time, current input type is {type(value)}."
    )


def _positive_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"The parameter '{name}' must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"The parameter '{name}' must be at least {minimum}, got {value}.")
    return value


class RestartStrategyConfiguration(abc.ABC):
    """Abstract configuration for restart strategies (compared by value)."""

    @abc.abstractmethod
    def get_description(self) -> str:
        """A human-readable description of the strategy."""

    def _key(self) -> tuple[Any, ...]:
        return ()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RestartStrategyConfiguration)
            and type(other) is type(self)
            and self._key() == other._key()
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, *self._key()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_description()})"


class RestartStrategies:
    """Factory methods for ``RestartStrategyConfiguration`` values."""

    class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
        """The job fails on the first failure."""

        def get_description(self) -> str:
            """``"Restart deactivated."``."""
            return "Restart deactivated."

    class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Restart up to ``restart_attempts`` times, waiting a fixed delay each time."""

        def __init__(self, restart_attempts: int, delay_between_attempts_interval: _Interval):
            self._restart_attempts = _positive_int(restart_attempts, "restart_attempts", 0)
            self._delay_ms = _millis(
                delay_between_attempts_interval, "delay_between_attempts_interval"
            )
            if self._delay_ms < 0:
                raise ValueError(
                    f"delay_between_attempts_interval must not be negative, got {self._delay_ms} ms"
                )

        def get_restart_attempts(self) -> int:
            """The maximum number of restarts."""
            return self._restart_attempts

        def get_delay_between_attempts_interval(self) -> timedelta:
            """The delay before each restart."""
            return timedelta(milliseconds=self._delay_ms)

        def get_description(self) -> str:
            """Flink's description text."""
            return (
                f"Restart with fixed delay ({format_duration_ms(self._delay_ms)}). "
                f"#{self._restart_attempts} restart attempts."
            )

        def _key(self) -> tuple[Any, ...]:
            return (self._restart_attempts, self._delay_ms)

    class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Restart unless more than ``max_failure_rate`` failures fall within the interval."""

        def __init__(
            self,
            max_failure_rate: int,
            failure_interval: _Interval,
            delay_between_attempts_interval: _Interval,
        ):
            self._max_failure_rate = _positive_int(max_failure_rate, "max_failure_rate", 1)
            self._failure_interval_ms = _millis(failure_interval, "failure_interval")
            self._delay_ms = _millis(
                delay_between_attempts_interval, "delay_between_attempts_interval"
            )
            if self._failure_interval_ms <= 0:
                raise ValueError(
                    f"failure_interval must be greater than 0 ms, got {self._failure_interval_ms}"
                )
            if self._delay_ms < 0:
                raise ValueError(
                    f"delay_between_attempts_interval must not be negative, got {self._delay_ms} ms"
                )

        def get_max_failure_rate(self) -> int:
            """The maximum number of failures tolerated per interval."""
            return self._max_failure_rate

        def get_failure_interval(self) -> timedelta:
            """The sliding interval over which failures are counted."""
            return timedelta(milliseconds=self._failure_interval_ms)

        def get_delay_between_attempts_interval(self) -> timedelta:
            """The delay before each restart."""
            return timedelta(milliseconds=self._delay_ms)

        def get_description(self) -> str:
            """Flink's description text."""
            return (
                f"Failure rate restart with maximum of {self._max_failure_rate} failures within "
                f"interval {format_duration_ms(self._failure_interval_ms)} and fixed delay "
                f"{format_duration_ms(self._delay_ms)}."
            )

        def _key(self) -> tuple[Any, ...]:
            return (self._max_failure_rate, self._failure_interval_ms, self._delay_ms)

    class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Restart with a delay that grows by ``backoff_multiplier`` up to ``max_backoff``."""

        def __init__(
            self,
            initial_backoff: _Interval,
            max_backoff: _Interval,
            backoff_multiplier: float,
            reset_backoff_threshold: _Interval,
            jitter_factor: float,
            attempts_before_reset_backoff: int = INFINITE_ATTEMPTS,
        ):
            self._initial_ms = _millis(initial_backoff, "initial_backoff")
            self._max_ms = _millis(max_backoff, "max_backoff")
            self._reset_ms = _millis(reset_backoff_threshold, "reset_backoff_threshold")
            self._multiplier = float(backoff_multiplier)
            self._jitter = float(jitter_factor)
            self._attempts = _positive_int(
                attempts_before_reset_backoff, "attempts_before_reset_backoff", 1
            )
            if self._initial_ms < 1:
                raise ValueError("Initial backoff must be at least 1 ms.")
            if self._max_ms < 1:
                raise ValueError("Maximum backoff must be at least 1 ms.")
            if self._initial_ms > self._max_ms:
                raise ValueError("Initial backoff cannot be higher than maximum backoff.")
            if not self._multiplier > 1 or math.isinf(self._multiplier):
                raise ValueError(
                    f"Backoff multiplier must be greater than 1, got {backoff_multiplier}."
                )
            if self._reset_ms < 1:
                raise ValueError(
                    "Threshold duration for exponential backoff reset must be at least 1 ms."
                )
            if not 0.0 <= self._jitter <= 1.0:
                raise ValueError(f"Jitter factor must be >= 0 and <= 1, got {jitter_factor}.")

        def get_initial_backoff(self) -> timedelta:
            """The delay before the first restart."""
            return timedelta(milliseconds=self._initial_ms)

        def get_max_backoff(self) -> timedelta:
            """The largest delay between restarts."""
            return timedelta(milliseconds=self._max_ms)

        def get_backoff_multiplier(self) -> float:
            """The factor applied to the delay after each failure."""
            return self._multiplier

        def get_reset_backoff_threshold(self) -> timedelta:
            """How long the job must run without failure to reset the backoff."""
            return timedelta(milliseconds=self._reset_ms)

        def get_jitter_factor(self) -> float:
            """The random portion (plus or minus) added to each delay."""
            return self._jitter

        def get_attempts_before_reset_backoff(self) -> int:
            """Restarts allowed before the backoff resets (Flink 1.19+)."""
            return self._attempts

        def get_description(self) -> str:
            """Flink's description text."""
            return (
                f"Restart with exponential delay: starting at "
                f"{format_duration_ms(self._initial_ms)}, increasing by {self._multiplier}, "
                f"with maximum {format_duration_ms(self._max_ms)}. Delay resets after "
                f"{format_duration_ms(self._reset_ms)} with jitter {self._jitter}"
            )

        def _key(self) -> tuple[Any, ...]:
            return (
                self._initial_ms,
                self._max_ms,
                self._multiplier,
                self._reset_ms,
                self._jitter,
                self._attempts,
            )

    class FallbackRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Use the cluster-level strategy (from configuration or the checkpointing default)."""

        def get_description(self) -> str:
            """``"Cluster level default restart strategy"``."""
            return "Cluster level default restart strategy"

    @staticmethod
    def no_restart() -> RestartStrategies.NoRestartStrategyConfiguration:
        """A configuration that never restarts."""
        return RestartStrategies.NoRestartStrategyConfiguration()

    @staticmethod
    def fall_back_restart() -> RestartStrategies.FallbackRestartStrategyConfiguration:
        """A configuration that defers to the cluster-level strategy."""
        return RestartStrategies.FallbackRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: _Interval
    ) -> RestartStrategies.FixedDelayRestartStrategyConfiguration:
        """Restart ``restart_attempts`` times with ``delay_between_attempts`` (ms or timedelta)."""
        return RestartStrategies.FixedDelayRestartStrategyConfiguration(
            restart_attempts, delay_between_attempts
        )

    @staticmethod
    def failure_rate_restart(
        failure_rate: int, failure_interval: _Interval, delay_interval: _Interval
    ) -> RestartStrategies.FailureRateRestartStrategyConfiguration:
        """Restart while at most ``failure_rate`` failures happen within ``failure_interval``."""
        return RestartStrategies.FailureRateRestartStrategyConfiguration(
            failure_rate, failure_interval, delay_interval
        )

    @staticmethod
    def exponential_delay_restart(
        initial_backoff: _Interval,
        max_backoff: _Interval,
        backoff_multiplier: float,
        reset_backoff_threshold: _Interval,
        jitter_factor: float,
    ) -> RestartStrategies.ExponentialDelayRestartStrategyConfiguration:
        """Restart forever with an exponentially growing, capped, jittered delay."""
        return RestartStrategies.ExponentialDelayRestartStrategyConfiguration(
            initial_backoff, max_backoff, backoff_multiplier, reset_backoff_threshold, jitter_factor
        )

    @staticmethod
    def from_configuration(config: Mapping[str, Any]) -> RestartStrategyConfiguration | None:
        """The strategy named by Flink's ``restart-strategy.*`` keys (see module function)."""
        return from_configuration(config)


def from_configuration(config: Mapping[str, Any]) -> RestartStrategyConfiguration | None:
    """The configuration named by ``restart-strategy.type`` (or the deprecated
    ``restart-strategy`` key), with Flink's defaults; None when neither key is set."""
    kind = _Opt.RESTART_STRATEGY.read(config)
    if kind is None:
        return None
    if kind == "none":
        return RestartStrategies.no_restart()
    if kind == "fixed-delay":
        return RestartStrategies.fixed_delay_restart(
            _Opt.FIXED_DELAY_ATTEMPTS.read(config), _Opt.FIXED_DELAY_DELAY.read(config)
        )
    if kind == "failure-rate":
        return RestartStrategies.failure_rate_restart(
            _Opt.FAILURE_RATE_MAX_FAILURES_PER_INTERVAL.read(config),
            _Opt.FAILURE_RATE_FAILURE_RATE_INTERVAL.read(config),
            _Opt.FAILURE_RATE_DELAY.read(config),
        )
    return RestartStrategies.ExponentialDelayRestartStrategyConfiguration(
        _Opt.EXPONENTIAL_DELAY_INITIAL_BACKOFF.read(config),
        _Opt.EXPONENTIAL_DELAY_MAX_BACKOFF.read(config),
        _Opt.EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER.read(config),
        _Opt.EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD.read(config),
        _Opt.EXPONENTIAL_DELAY_JITTER_FACTOR.read(config),
        _Opt.EXPONENTIAL_DELAY_ATTEMPTS.read(config),
    )
