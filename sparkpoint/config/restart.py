"""``RestartStrategyOptions``: Flink's ``restart-strategy.*`` keys and their defaults."""

from __future__ import annotations

from sparkpoint.config.option import (
    DURATION,
    ConfigOption,
    OptionGroup,
    enum_type,
    float_type,
    int_type,
)

__all__ = ["INFINITE_ATTEMPTS", "RestartStrategyOptions"]

INFINITE_ATTEMPTS = 2**31 - 1
"""Java ``Integer.MAX_VALUE``: Flink's "retry forever" attempt count."""

_PREFIX = "restart-strategy"


class RestartStrategyOptions(OptionGroup):
    """Which restart strategy a failed job uses, and its parameters."""

    TITLE = "Restart strategy"

    RESTART_STRATEGY: ConfigOption[str | None] = ConfigOption(
        f"{_PREFIX}.type",
        enum_type(
            "none",
            "fixed-delay",
            "failure-rate",
            "exponential-delay",
            aliases={
                "off": "none",
                "disable": "none",
                "fixeddelay": "fixed-delay",
                "failurerate": "failure-rate",
                "exponentialdelay": "exponential-delay",
            },
        ),
        None,
        "Restart strategy; unset: fixed-delay with unlimited attempts and 1 s delay when "
        "checkpointing is on, none when it is off.",
        (_PREFIX,),
    )
    FIXED_DELAY_ATTEMPTS = ConfigOption(
        f"{_PREFIX}.fixed-delay.attempts",
        int_type(minimum=0),
        1,
        "Restarts before the job fails (fixed-delay).",
    )
    FIXED_DELAY_DELAY = ConfigOption(
        f"{_PREFIX}.fixed-delay.delay",
        DURATION,
        1_000,
        "Delay before each restart (fixed-delay).",
    )
    FAILURE_RATE_MAX_FAILURES_PER_INTERVAL = ConfigOption(
        f"{_PREFIX}.failure-rate.max-failures-per-interval",
        int_type(minimum=1),
        1,
        "Most failures tolerated within the interval (failure-rate).",
    )
    FAILURE_RATE_FAILURE_RATE_INTERVAL = ConfigOption(
        f"{_PREFIX}.failure-rate.failure-rate-interval",
        DURATION,
        60_000,
        "Sliding interval over which failures are counted (failure-rate).",
    )
    FAILURE_RATE_DELAY = ConfigOption(
        f"{_PREFIX}.failure-rate.delay",
        DURATION,
        1_000,
        "Delay before each restart (failure-rate).",
    )
    EXPONENTIAL_DELAY_INITIAL_BACKOFF = ConfigOption(
        f"{_PREFIX}.exponential-delay.initial-backoff",
        DURATION,
        1_000,
        "Delay before the first restart (exponential-delay).",
    )
    EXPONENTIAL_DELAY_MAX_BACKOFF = ConfigOption(
        f"{_PREFIX}.exponential-delay.max-backoff",
        DURATION,
        60_000,
        "Largest delay between restarts (exponential-delay).",
    )
    EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER = ConfigOption(
        f"{_PREFIX}.exponential-delay.backoff-multiplier",
        float_type(above=1.0),
        1.5,
        "Factor applied to the delay after each failure, above 1 (exponential-delay).",
    )
    EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD = ConfigOption(
        f"{_PREFIX}.exponential-delay.reset-backoff-threshold",
        DURATION,
        3_600_000,
        "Time without failure after which the delay resets (exponential-delay).",
    )
    EXPONENTIAL_DELAY_JITTER_FACTOR = ConfigOption(
        f"{_PREFIX}.exponential-delay.jitter-factor",
        float_type(0.0, 1.0),
        0.1,
        "Random portion added to or taken from each delay (exponential-delay).",
    )
    EXPONENTIAL_DELAY_ATTEMPTS = ConfigOption(
        f"{_PREFIX}.exponential-delay.attempts-before-reset-backoff",
        int_type(minimum=1),
        INFINITE_ATTEMPTS,
        "Restarts allowed before the job fails, counted since the last reset (exponential-delay).",
    )
    RESTORE_ATTEMPTS = ConfigOption(
        "sparkpoint.restart.restore-attempts",
        int_type(minimum=1),
        3,
        "sparkpoint: times the restore of one snapshot (the latest checkpoint, or the "
        "savepoint the job starts from) may fail before the job fails, whatever its restart "
        "strategy allows: restarting from the same snapshot would fail the same way. A "
        "failure counts when it is a state-restore error (a corrupt or truncated state file), "
        "or a Python worker that died (a crash, or sparkpoint.restart.restore-timeout) before "
        "any epoch succeeded since the restore.",
    )
    RESTORE_TIMEOUT = ConfigOption(
        "sparkpoint.restart.restore-timeout",
        DURATION,
        600_000,
        "sparkpoint: longest a task of the first run after a restore may take; past it the "
        "task's Python worker exits (its stacks in the executor's log), which counts against "
        "sparkpoint.restart.restore-attempts, so a snapshot that makes its restore hang "
        "cannot keep the job waiting. 0 disables it.",
    )
