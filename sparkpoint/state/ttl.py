"""``StateTtlConfig``: time-to-live of keyed state, as PyFlink spells it.

The TTL is given as anything with ``to_milliseconds()`` (PyFlink's ``Time``/``Duration``), a
``datetime.timedelta`` or an ``int`` of milliseconds.
"""

from __future__ import annotations

import datetime as dt
from enum import Enum
from typing import Any

__all__ = ["StateTtlConfig", "ttl_to_millis"]


def ttl_to_millis(ttl: Any) -> int:
    """Milliseconds of a ``Time``/``Duration``/``timedelta``/``int``; must be positive."""
    if isinstance(ttl, dt.timedelta):
        ms = int(ttl.total_seconds() * 1000)
    elif isinstance(ttl, int) and not isinstance(ttl, bool):
        ms = ttl
    elif hasattr(ttl, "to_milliseconds"):
        ms = int(ttl.to_milliseconds())
    else:
        raise ValueError(f"TTL must be a Time, Duration, timedelta or milliseconds, got {ttl!r}")
    if ms <= 0:
        raise ValueError(f"TTL must be positive, got {ms} ms")
    return ms


class StateTtlConfig:
    """Configuration of state TTL: how long, what refreshes it, visibility and cleanup."""

    class UpdateType(Enum):
        """What refreshes an entry's last-access timestamp."""

        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        """Whether expired values not yet cleaned up may be returned."""

        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        """The time TTL is measured in (only processing time, as in Flink)."""

        ProcessingTime = 0

    class CleanupStrategies:
        """Which background cleanups run: full-snapshot, incremental, RocksDB compaction."""

        class Strategies(Enum):
            """The cleanup strategy kinds."""

            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy:
            """Base of strategy parameters."""

        class EmptyCleanupStrategy(CleanupStrategy):
            """A strategy without parameters."""

        class IncrementalCleanupStrategy(CleanupStrategy):
            """Check ``cleanup_size`` entries per state access (and per record if asked)."""

            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> None:
                if cleanup_size <= 0:
                    raise ValueError(f"cleanup_size must be positive, got {cleanup_size}")
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                """Entries checked per cleanup step."""
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                """Whether a cleanup step runs for every processed record too."""
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            """Drop expired entries during RocksDB compaction."""

            def __init__(self, query_time_after_num_entries: int) -> None:
                self._query_time_after_num_entries = query_time_after_num_entries

            def get_query_time_after_num_entries(self) -> int:
                """Entries processed before the filter reads the clock again."""
                return self._query_time_after_num_entries

        EMPTY_STRATEGY = EmptyCleanupStrategy()

        def __init__(
            self,
            strategies: dict[
                StateTtlConfig.CleanupStrategies.Strategies,
                StateTtlConfig.CleanupStrategies.CleanupStrategy,
            ],
            is_cleanup_in_background: bool,
        ) -> None:
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            """Whether default background cleanup is on."""
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            """Whether expired entries are left out of full snapshots."""
            return self.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(
            self,
        ) -> StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy | None:
            """The incremental strategy (default 5 entries when cleanup in background)."""
            cls = StateTtlConfig.CleanupStrategies
            strategy = self._strategies.get(cls.Strategies.INCREMENTAL_CLEANUP)
            if strategy is None and self._is_cleanup_in_background:
                return cls.IncrementalCleanupStrategy(5, False)
            return strategy  # type: ignore[return-value]

        def get_rocksdb_compact_filter_cleanup_strategy(
            self,
        ) -> StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy | None:
            """The compaction-filter strategy (default 1000 entries when in background)."""
            cls = StateTtlConfig.CleanupStrategies
            strategy = self._strategies.get(cls.Strategies.ROCKSDB_COMPACTION_FILTER)
            if strategy is None and self._is_cleanup_in_background:
                return cls.RocksdbCompactFilterCleanupStrategy(1000)
            return strategy  # type: ignore[return-value]

    def __init__(
        self,
        update_type: StateTtlConfig.UpdateType,
        state_visibility: StateTtlConfig.StateVisibility,
        ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic,
        ttl: Any,
        cleanup_strategies: StateTtlConfig.CleanupStrategies,
    ) -> None:
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self._ttl_millis = ttl_to_millis(ttl)
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Any) -> StateTtlConfig.Builder:
        """A builder with defaults: OnCreateAndWrite, NeverReturnExpired, processing time."""
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> StateTtlConfig.UpdateType:
        """What refreshes the timestamp."""
        return self._update_type

    def get_state_visibility(self) -> StateTtlConfig.StateVisibility:
        """Whether expired values may be returned."""
        return self._state_visibility

    def get_ttl(self) -> Any:
        """The TTL as given."""
        return self._ttl

    def get_ttl_millis(self) -> int:
        """The TTL in milliseconds."""
        return self._ttl_millis

    def get_ttl_time_characteristic(self) -> StateTtlConfig.TtlTimeCharacteristic:
        """The time characteristic."""
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        """Whether TTL is on (update type not Disabled)."""
        return self._update_type != StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> StateTtlConfig.CleanupStrategies:
        """The cleanup strategies."""
        return self._cleanup_strategies

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig<stateVisibility={self._state_visibility.name}, "
            f"updateType={self._update_type.name}, ttlTimeCharacteristic="
            f"{self._ttl_time_characteristic.name}, ttl={self._ttl_millis}ms>"
        )

    class Builder:
        """Builds a ``StateTtlConfig``."""

        def __init__(self, ttl: Any) -> None:
            ttl_to_millis(ttl)
            self._ttl = ttl
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: dict[Any, Any] = {}

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            """Set what refreshes the timestamp."""
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            """Refresh on create and write only."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            """Refresh on reads too."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(
            self, state_visibility: StateTtlConfig.StateVisibility
        ) -> StateTtlConfig.Builder:
            """Set whether expired values may be returned."""
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            """Return expired values until they are cleaned up."""
            return self.set_state_visibility(
                StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
            )

        def never_return_expired(self) -> StateTtlConfig.Builder:
            """Never return expired values."""
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic
        ) -> StateTtlConfig.Builder:
            """Set the time characteristic."""
            self._ttl_time_characteristic = ttl_time_characteristic
            return self

        def use_processing_time(self) -> StateTtlConfig.Builder:
            """Measure TTL in processing time."""
            return self.set_ttl_time_characteristic(
                StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            )

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            """Leave expired entries out of full snapshots."""
            cls = StateTtlConfig.CleanupStrategies
            self._strategies[cls.Strategies.FULL_STATE_SCAN_SNAPSHOT] = cls.EMPTY_STRATEGY
            return self

        def cleanup_incrementally(
            self, cleanup_size: int, run_cleanup_for_every_record: bool
        ) -> StateTtlConfig.Builder:
            """Check ``cleanup_size`` entries for expiry on each state access."""
            cls = StateTtlConfig.CleanupStrategies
            self._strategies[cls.Strategies.INCREMENTAL_CLEANUP] = cls.IncrementalCleanupStrategy(
                cleanup_size, run_cleanup_for_every_record
            )
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int
        ) -> StateTtlConfig.Builder:
            """Drop expired entries in RocksDB compactions."""
            cls = StateTtlConfig.CleanupStrategies
            self._strategies[cls.Strategies.ROCKSDB_COMPACTION_FILTER] = (
                cls.RocksdbCompactFilterCleanupStrategy(query_time_after_num_entries)
            )
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            """Turn off the default background cleanup."""
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Any) -> StateTtlConfig.Builder:
            """Set the TTL."""
            ttl_to_millis(ttl)
            self._ttl = ttl
            return self

        def build(self) -> StateTtlConfig:
            """The configuration."""
            return StateTtlConfig(
                self._update_type,
                self._state_visibility,
                self._ttl_time_characteristic,
                self._ttl,
                StateTtlConfig.CleanupStrategies(self._strategies, self._is_cleanup_in_background),
            )
