"""Restart decisions of the job master: Flink's ``RestartBackoffTimeStrategy`` family.

The job master calls, on every job failure::

    strategy.notify_failure(cause)          # record it
    if not strategy.can_restart(): fail the job
    else: wait strategy.get_backoff_time_ms(), restore from the latest checkpoint, go on

All times are milliseconds of an injectable ``Clock``'s monotonic time; tests pass a
``sparkpoint.testing.ManualClock``.
Semantics follow Flink 1.19's ``FixedDelay``/``FailureRate``/``ExponentialDelay``
``RestartBackoffTimeStrategy`` classes.
"""

from __future__ import annotations

import abc
import random
from collections import deque
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.common.restart_strategy import (
    INFINITE_ATTEMPTS,
    RestartStrategies,
    RestartStrategyConfiguration,
    from_configuration,
)

__all__ = [
    "ExponentialDelayRestartBackoffTimeStrategy",
    "FailureRateRestartBackoffTimeStrategy",
    "FixedDelayRestartBackoffTimeStrategy",
    "NoRestartBackoffTimeStrategy",
    "RestartBackoffTimeStrategy",
    "create_restart_backoff_strategy",
]

_FALLBACK_CHECKPOINTING_DELAY_MS = 1000
_LONG_MAX = 2**63 - 1


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


class RestartBackoffTimeStrategy(abc.ABC):
    """Decides whether, and after how long, a failed job may restart."""

    @abc.abstractmethod
    def notify_failure(self, cause: BaseException | None, timestamp_ms: int | None = None) -> bool:
        """Record a failure (at ``timestamp_ms``, default now); True if it starts a new
        restart attempt, False if it was merged into a pending one."""

    @abc.abstractmethod
    def can_restart(self) -> bool:
        """Whether the job may restart after the failures recorded so far."""

    @abc.abstractmethod
    def get_backoff_time_ms(self) -> int:
        """Milliseconds to wait before restarting."""


class NoRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Never restarts."""

    def notify_failure(self, cause: BaseException | None, timestamp_ms: int | None = None) -> bool:
        """Record nothing; every failure is final."""
        return True

    def can_restart(self) -> bool:
        """Always False."""
        return False

    def get_backoff_time_ms(self) -> int:
        """Always 0."""
        return 0

    def __repr__(self) -> str:
        return "NoRestartBackoffTimeStrategy"


class FixedDelayRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Allows ``max_attempts`` restarts, each after ``backoff_ms``."""

    def __init__(self, max_attempts: int, backoff_ms: int) -> None:
        if max_attempts < 0:
            raise ValueError("Maximum number of restart attempts must be at least 0.")
        if backoff_ms < 0:
            raise ValueError("Backoff time between restart attempts must be at least 0 ms.")
        self._max_attempts = max_attempts
        self._backoff_ms = backoff_ms
        self._current_attempt = 0

    @property
    def current_restart_attempt(self) -> int:
        """Failures seen so far."""
        return self._current_attempt

    def notify_failure(self, cause: BaseException | None, timestamp_ms: int | None = None) -> bool:
        """Count one more restart attempt."""
        self._current_attempt += 1
        return True

    def can_restart(self) -> bool:
        """True while the failures seen do not exceed ``max_attempts``."""
        return self._current_attempt <= self._max_attempts

    def get_backoff_time_ms(self) -> int:
        """The fixed delay."""
        return self._backoff_ms

    def __repr__(self) -> str:
        return (
            f"FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts={self._max_attempts}, "
            f"backoffTimeMS={self._backoff_ms})"
        )


class FailureRateRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Refuses to restart once more than ``max_failures_per_interval`` failures fall within
    one ``failures_interval_ms`` window."""

    def __init__(
        self,
        max_failures_per_interval: int,
        failures_interval_ms: int,
        backoff_ms: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if max_failures_per_interval <= 0:
            raise ValueError(
                "Maximum number of restart attempts per time unit must be greater than 0."
            )
        if failures_interval_ms <= 0:
            raise ValueError("Failures interval must be greater than 0 ms.")
        if backoff_ms < 0:
            raise ValueError("Backoff time must be at least 0 ms.")
        self._max_failures = max_failures_per_interval
        self._interval_ms = failures_interval_ms
        self._backoff_ms = backoff_ms
        self._clock = clock
        self._failure_timestamps: deque[int] = deque()

    def _queue_full(self) -> bool:
        return len(self._failure_timestamps) > self._max_failures

    def notify_failure(self, cause: BaseException | None, timestamp_ms: int | None = None) -> bool:
        """Remember the failure time, keeping the last ``max + 1`` of them."""
        if self._queue_full():
            self._failure_timestamps.popleft()
        now = self._clock.monotonic_ms() if timestamp_ms is None else timestamp_ms
        self._failure_timestamps.append(now)
        return True

    def can_restart(self) -> bool:
        """False when ``max + 1`` failures happened within the interval before now."""
        if self._queue_full():
            return self._clock.monotonic_ms() - self._failure_timestamps[0] > self._interval_ms
        return True

    def get_backoff_time_ms(self) -> int:
        """The fixed delay."""
        return self._backoff_ms

    def __repr__(self) -> str:
        return (
            f"FailureRateRestartBackoffTimeStrategy(failuresIntervalMS={self._interval_ms}, "
            f"backoffTimeMS={self._backoff_ms}, maxFailuresPerInterval={self._max_failures})"
        )


class ExponentialDelayRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Backoff ``initial * multiplier**attempt`` capped at ``max``, plus or minus jitter;
    resets after ``reset_threshold_ms`` past the last scheduled restart without failure."""

    _NO_RESTART_YET = -(2**31)

    def __init__(
        self,
        initial_backoff_ms: int,
        max_backoff_ms: int,
        backoff_multiplier: float,
        reset_backoff_threshold_ms: int,
        jitter_factor: float,
        attempts_before_reset_backoff: int = INFINITE_ATTEMPTS,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        if initial_backoff_ms < 1:
            raise ValueError("Initial backoff must be at least 1.")
        if max_backoff_ms < 1:
            raise ValueError("Maximum backoff must be at least 1.")
        if initial_backoff_ms > max_backoff_ms:
            raise ValueError("Initial backoff cannot be higher than maximum backoff.")
        if not backoff_multiplier > 1:
            raise ValueError("Backoff multiplier must be greater than 1.")
        if reset_backoff_threshold_ms < 1:
            raise ValueError("Threshold duration for exponential backoff reset must be at least 1.")
        if not 0 <= jitter_factor <= 1:
            raise ValueError("Jitter factor must be >= 0 and <= 1.")
        if attempts_before_reset_backoff < 1:
            raise ValueError("The attemptsBeforeResetBackoff must be at least 1.")
        self._initial_ms = initial_backoff_ms
        self._max_ms = max_backoff_ms
        self._multiplier = backoff_multiplier
        self._reset_ms = reset_backoff_threshold_ms
        self._jitter = jitter_factor
        self._attempts_before_reset = attempts_before_reset_backoff
        self._clock = clock
        self._rng = rng or random.Random()
        self._current_attempt = 0
        self._next_restart_ms = self._NO_RESTART_YET

    @property
    def current_restart_attempt(self) -> int:
        """Restart attempts since the last backoff reset."""
        return self._current_attempt

    def notify_failure(self, cause: BaseException | None, timestamp_ms: int | None = None) -> bool:
        """Schedule the next restart; failures before it is due merge into it (False)."""
        now = self._clock.monotonic_ms() if timestamp_ms is None else timestamp_ms
        if now <= self._next_restart_ms:
            return False
        if now - self._next_restart_ms >= self._reset_ms:
            self._current_attempt = 0
        self._next_restart_ms = now + self._actual_backoff_ms()
        self._current_attempt += 1
        return True

    def can_restart(self) -> bool:
        """True while attempts since the last reset do not exceed the configured limit."""
        return self._current_attempt <= self._attempts_before_reset

    def get_backoff_time_ms(self) -> int:
        """Milliseconds from now until the scheduled restart (never negative)."""
        if self._next_restart_ms == self._NO_RESTART_YET:
            raise RuntimeError("get_backoff_time_ms() called before any notify_failure()")
        return max(0, self._next_restart_ms - self._clock.monotonic_ms())

    def _actual_backoff_ms(self) -> int:
        # As Flink: initial * multiplier^attempt in double, truncated to long; jitter is taken
        # from that uncapped value, and only the sum is capped at max and floored at initial.
        try:
            exponent_ms = self._initial_ms * self._multiplier**self._current_attempt
        except OverflowError:
            exponent_ms = float("inf")
        current_ms = _LONG_MAX if exponent_ms >= _LONG_MAX else int(exponent_ms)
        jitter_ms = 0
        if self._jitter:
            offset = int(current_ms * self._jitter)
            jitter_ms = self._rng.randint(-offset, offset)
        return max(self._initial_ms, min(current_ms + jitter_ms, self._max_ms))

    def __repr__(self) -> str:
        return (
            f"ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={self._initial_ms}, "
            f"maxBackoffMS={self._max_ms}, backoffMultiplier={self._multiplier}, "
            f"resetBackoffThresholdMS={self._reset_ms}, jitterFactor={self._jitter}, "
            f"attemptsBeforeResetBackoff={self._attempts_before_reset}, "
            f"currentRestartAttempt={self._current_attempt}, "
            f"nextRestartTimestamp={self._next_restart_ms})"
        )


def create_restart_backoff_strategy(
    config: RestartStrategyConfiguration | Mapping[str, Any] | None,
    *,
    checkpointing_enabled: bool = False,
    cluster_config: Mapping[str, Any] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    rng: random.Random | None = None,
) -> RestartBackoffTimeStrategy:
    """The decision object for a job's restart configuration.

    ``config`` is the job's configuration (``env.set_restart_strategy``), or Flink keys. A
    missing or fallback configuration uses ``cluster_config``'s ``restart-strategy.*`` keys;
    without those, fixed delay with unlimited attempts and 1 s delay when checkpointing is
    enabled, else no restart.
    """
    if config is not None and not isinstance(config, RestartStrategyConfiguration):
        config = from_configuration(config)
    if config is None or isinstance(config, RestartStrategies.FallbackRestartStrategyConfiguration):
        config = from_configuration(cluster_config) if cluster_config is not None else None
        if config is None:
            if checkpointing_enabled:
                config = RestartStrategies.fixed_delay_restart(
                    INFINITE_ATTEMPTS, _FALLBACK_CHECKPOINTING_DELAY_MS
                )
            else:
                config = RestartStrategies.no_restart()
    if isinstance(config, RestartStrategies.NoRestartStrategyConfiguration):
        return NoRestartBackoffTimeStrategy()
    if isinstance(config, RestartStrategies.FixedDelayRestartStrategyConfiguration):
        return FixedDelayRestartBackoffTimeStrategy(
            config.get_restart_attempts(), _ms(config.get_delay_between_attempts_interval())
        )
    if isinstance(config, RestartStrategies.FailureRateRestartStrategyConfiguration):
        return FailureRateRestartBackoffTimeStrategy(
            config.get_max_failure_rate(),
            _ms(config.get_failure_interval()),
            _ms(config.get_delay_between_attempts_interval()),
            clock=clock,
        )
    if isinstance(config, RestartStrategies.ExponentialDelayRestartStrategyConfiguration):
        return ExponentialDelayRestartBackoffTimeStrategy(
            _ms(config.get_initial_backoff()),
            _ms(config.get_max_backoff()),
            config.get_backoff_multiplier(),
            _ms(config.get_reset_backoff_threshold()),
            config.get_jitter_factor(),
            config.get_attempts_before_reset_backoff(),
            clock=clock,
            rng=rng,
        )
    raise ValueError(f"Unsupported restart strategy configuration: {config!r}")
