"""RocksDB options: Flink's ``PredefinedOptions`` profiles and user option dicts, applied to
real ``rocksdict.Options`` calls.

A profile is applied first, then the user's options on top (Flink: "the options from the
factory are applied on top of the predefined options"). User options use Flink's
``state.backend.rocksdb.*`` keys (``sparkpoint.config.RocksDBOptions``) or the name of a
rocksdict ``Options`` setter (``"set_max_open_files"`` or ``"max_open_files"``), parsed as
the option of that setting is. ``effective_settings`` returns what was set, so tests and logs
can show it without opening a database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import rocksdict

from sparkpoint.config import BOOLEAN, ConfigOption, RocksDBOptions
from sparkpoint.errors import ConfigurationError

__all__ = [
    "PredefinedOptions",
    "build_db_options",
    "effective_settings",
]

_KB = 1024
_MB = 1024 * _KB
_GB = 1024 * _MB


class PredefinedOptions:
    """Flink's predefined RocksDB profiles (PyFlink spells them as int constants)."""

    DEFAULT = 0
    SPINNING_DISK_OPTIMIZED = 1
    SPINNING_DISK_OPTIMIZED_HIGH_MEM = 2
    FLASH_SSD_OPTIMIZED = 3

    _NAMES = {
        0: "DEFAULT",
        1: "SPINNING_DISK_OPTIMIZED",
        2: "SPINNING_DISK_OPTIMIZED_HIGH_MEM",
        3: "FLASH_SSD_OPTIMIZED",
    }

    @staticmethod
    def name_of(value: int) -> str:
        """The constant's name; ``ValueError`` for an unknown profile."""
        try:
            return PredefinedOptions._NAMES[int(value)]
        except (KeyError, ValueError, TypeError):
            raise ValueError(
                f"Unknown PredefinedOptions value {value!r}; expected one of "
                f"{sorted(PredefinedOptions._NAMES)} "
                f"({', '.join(PredefinedOptions._NAMES.values())})"
            ) from None


# Settings per profile, in Flink's order (PredefinedOptions.java). ``use_fsync`` false
# everywhere: Flink never recovers from the local RocksDB files, checkpoints are the truth.
_PROFILES: dict[int, dict[str, Any]] = {
    PredefinedOptions.DEFAULT: {"use_fsync": False},
    PredefinedOptions.SPINNING_DISK_OPTIMIZED: {
        "compaction_style": "level",
        "level_compaction_dynamic_level_bytes": True,
        "increase_parallelism": 4,
        "use_fsync": False,
        "max_open_files": -1,
    },
    PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM: {
        "compaction_style": "level",
        "level_compaction_dynamic_level_bytes": True,
        "target_file_size_base": 256 * _MB,
        "max_bytes_for_level_base": 1 * _GB,
        "write_buffer_size": 64 * _MB,
        "increase_parallelism": 4,
        "min_write_buffer_number_to_merge": 3,
        "max_write_buffer_number": 4,
        "use_fsync": False,
        "max_open_files": -1,
        "block_cache_size": 256 * _MB,
        "block_size": 128 * _KB,
    },
    PredefinedOptions.FLASH_SSD_OPTIMIZED: {
        "increase_parallelism": 4,
        "use_fsync": False,
        "max_open_files": -1,
    },
}

_R = RocksDBOptions
_DEFAULT_COMPACTION_STYLE = "universal"
# With universal compaction: the sorted runs that start a compaction. RocksDB's default is
# 4; with 8, each epoch's small file is merged less often, so checkpoints upload less
# (docs/benchmarks.md, compaction styles); bloom filters keep reads over more runs cheap.
_SORTED_RUNS_TRIGGER = "level_zero_file_num_compaction_trigger"
_DEFAULT_SORTED_RUNS_TRIGGER = 8
# rocksdict setting name -> the Flink option that sets it.
_OPTION_OF_SETTING: dict[str, ConfigOption[Any]] = {
    "increase_parallelism": _R.MAX_BACKGROUND_THREADS,
    "max_open_files": _R.MAX_OPEN_FILES,
    "db_log_dir": _R.LOG_DIR,
    "max_log_file_size": _R.LOG_MAX_FILE_SIZE,
    "keep_log_file_num": _R.LOG_FILE_NUM,
    "compaction_style": _R.COMPACTION_STYLE,
    "level_compaction_dynamic_level_bytes": _R.USE_DYNAMIC_LEVEL_SIZE,
    "target_file_size_base": _R.TARGET_FILE_SIZE_BASE,
    "max_bytes_for_level_base": _R.MAX_SIZE_LEVEL_BASE,
    "write_buffer_size": _R.WRITE_BUFFER_SIZE,
    "max_write_buffer_number": _R.MAX_WRITE_BUFFER_NUMBER,
    "min_write_buffer_number_to_merge": _R.MIN_WRITE_BUFFER_NUMBER_TO_MERGE,
    "block_size": _R.BLOCK_SIZE,
    "metadata_block_size": _R.METADATA_BLOCK_SIZE,
    "block_cache_size": _R.BLOCK_CACHE_SIZE,
    "use_bloom_filter": _R.USE_BLOOM_FILTER,
    "bloom_filter_bits_per_key": _R.BLOOM_FILTER_BITS_PER_KEY,
    "bloom_filter_block_based_mode": _R.BLOOM_FILTER_BLOCK_BASED_MODE,
    "compression_type": _R.COMPRESSION_TYPE,
}
_SETTING_OF_KEY = {option.key: setting for setting, option in _OPTION_OF_SETTING.items()}

# Settings that go to the block-based table factory instead of Options.
_TABLE_SETTINGS = {
    "block_size",
    "metadata_block_size",
    "block_cache_size",
    "use_bloom_filter",
    "bloom_filter_bits_per_key",
    "bloom_filter_block_based_mode",
}


def _normalise(name: str, value: Any) -> tuple[str, Any]:
    """(setting name, typed value) for one user option; ``ConfigurationError`` when unknown
    or invalid."""
    setting = _SETTING_OF_KEY.get(name)
    if setting is None:
        setting = name[4:] if name.startswith("set_") else name
    option = _OPTION_OF_SETTING.get(setting)
    if option is not None:
        typed = option.parse(value, name)
        # rocksdict's enum constructors are named in lower case.
        return setting, typed.lower() if setting == "compaction_style" else typed
    if setting == "use_fsync":
        return setting, BOOLEAN.parse(value, name)
    if hasattr(rocksdict.Options, f"set_{setting}"):
        return setting, value
    raise ConfigurationError(
        f"Unknown RocksDB option {name!r}: use a state.backend.rocksdb.* key "
        f"({', '.join(sorted(_SETTING_OF_KEY))}) or a rocksdict Options setter name"
    )


def effective_settings(
    predefined_options: int = PredefinedOptions.DEFAULT,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings applied for a profile plus user options (user options win)."""
    PredefinedOptions.name_of(predefined_options)
    # sparkpoint's defaults where the profile sets nothing; Flink's differ
    # (docs/architecture.md says why, docs/benchmarks.md has the measurements): bloom
    # filters (a point read skips every SST that cannot hold its key) and universal
    # compaction (every task reopens its database, so every epoch flushes a file, which
    # levelled compaction keeps merging into the level holding all the state).
    settings = {
        "use_bloom_filter": _R.USE_BLOOM_FILTER.default,
        "compaction_style": _DEFAULT_COMPACTION_STYLE,
    }
    settings.update(_PROFILES[int(predefined_options)])
    for name, value in (options or {}).items():
        key, typed = _normalise(name, value)
        settings[key] = typed
    if settings["compaction_style"] == "universal":
        settings.setdefault(_SORTED_RUNS_TRIGGER, _DEFAULT_SORTED_RUNS_TRIGGER)
    return settings


def _apply_option(opts: rocksdict.Options, setting: str, value: Any) -> None:
    if setting == "increase_parallelism":
        opts.increase_parallelism(value)
    elif setting == "compaction_style":
        opts.set_compaction_style(getattr(rocksdict.DBCompactionStyle, value)())
    elif setting == "compression_type":
        opts.set_compression_type(getattr(rocksdict.DBCompressionType, value)())
    else:
        setter: Callable[[Any], None] = getattr(opts, f"set_{setting}")
        setter(value)


def build_db_options(
    predefined_options: int = PredefinedOptions.DEFAULT,
    options: Mapping[str, Any] | None = None,
) -> rocksdict.Options:
    """A raw-mode ``rocksdict.Options`` with the profile and user options applied."""
    settings = effective_settings(predefined_options, options)
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    table_settings = {k: v for k, v in settings.items() if k in _TABLE_SETTINGS}
    for setting, value in settings.items():
        if setting not in _TABLE_SETTINGS:
            _apply_option(opts, setting, value)
    if table_settings:
        table = rocksdict.BlockBasedOptions()
        if "block_size" in table_settings:
            table.set_block_size(table_settings["block_size"])
        if "metadata_block_size" in table_settings:
            table.set_metadata_block_size(table_settings["metadata_block_size"])
        if "block_cache_size" in table_settings:
            table.set_block_cache(rocksdict.Cache(table_settings["block_cache_size"]))
        if table_settings.get("use_bloom_filter"):
            bits, block_based = _R.BLOOM_FILTER_BITS_PER_KEY, _R.BLOOM_FILTER_BLOCK_BASED_MODE
            table.set_bloom_filter(
                table_settings.get("bloom_filter_bits_per_key", bits.default),
                table_settings.get("bloom_filter_block_based_mode", block_based.default),
            )
        opts.set_block_based_table_factory(table)
    return opts
