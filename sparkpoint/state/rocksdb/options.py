"""RocksDB options: Flink's ``PredefinedOptions`` profiles and user option dicts, applied to
real ``rocksdict.Options`` calls.

A profile is applied first, then the user's options on top (Flink: "the options from the
factory are applied on top of the predefined options"). User options use Flink's
``state.backend.rocksdb.*`` keys (``RocksDBConfigurableOptions``) or the name of a rocksdict
``Options`` setter (``"set_max_open_files"`` or ``"max_open_files"``). ``effective_settings``
returns what was set, so tests and logs can show it without opening a database.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import rocksdict

__all__ = [
    "PredefinedOptions",
    "build_db_options",
    "effective_settings",
    "parse_memory_size",
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

# Flink's RocksDBConfigurableOptions keys -> our setting names.
_FLINK_KEYS: dict[str, str] = {
    "state.backend.rocksdb.thread.num": "increase_parallelism",
    "state.backend.rocksdb.files.open": "max_open_files",
    "state.backend.rocksdb.log.dir": "db_log_dir",
    "state.backend.rocksdb.log.max-file-size": "max_log_file_size",
    "state.backend.rocksdb.log.file-num": "keep_log_file_num",
    "state.backend.rocksdb.compaction.style": "compaction_style",
    "state.backend.rocksdb.compaction.level.use-dynamic-size": (
        "level_compaction_dynamic_level_bytes"
    ),
    "state.backend.rocksdb.compaction.level.target-file-size-base": "target_file_size_base",
    "state.backend.rocksdb.compaction.level.max-size-level-base": "max_bytes_for_level_base",
    "state.backend.rocksdb.writebuffer.size": "write_buffer_size",
    "state.backend.rocksdb.writebuffer.count": "max_write_buffer_number",
    "state.backend.rocksdb.writebuffer.number-to-merge": "min_write_buffer_number_to_merge",
    "state.backend.rocksdb.block.blocksize": "block_size",
    "state.backend.rocksdb.block.metadata-blocksize": "metadata_block_size",
    "state.backend.rocksdb.block.cache-size": "block_cache_size",
    "state.backend.rocksdb.use-bloom-filter": "use_bloom_filter",
    "state.backend.rocksdb.bloom-filter.bits-per-key": "bloom_filter_bits_per_key",
    "state.backend.rocksdb.bloom-filter.block-based-mode": "bloom_filter_block_based_mode",
    "state.backend.rocksdb.compression.type": "compression_type",
}

_MEMORY_SETTINGS = {
    "target_file_size_base",
    "max_bytes_for_level_base",
    "write_buffer_size",
    "block_size",
    "metadata_block_size",
    "block_cache_size",
    "max_log_file_size",
}
_INT_SETTINGS = {
    "increase_parallelism",
    "max_open_files",
    "keep_log_file_num",
    "max_write_buffer_number",
    "min_write_buffer_number_to_merge",
    "bloom_filter_bits_per_key",
}
_BOOL_SETTINGS = {
    "use_fsync",
    "level_compaction_dynamic_level_bytes",
    "use_bloom_filter",
    "bloom_filter_block_based_mode",
}
# Settings that go to the block-based table factory instead of Options.
_TABLE_SETTINGS = {
    "block_size",
    "metadata_block_size",
    "block_cache_size",
    "use_bloom_filter",
    "bloom_filter_bits_per_key",
    "bloom_filter_block_based_mode",
}
_COMPACTION_STYLES = {"level", "universal", "fifo"}
_COMPRESSION_TYPES = {"none", "snappy", "zlib", "bz2", "lz4", "lz4hc", "zstd"}

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
_SIZE_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": _KB, "kb": _KB, "kibibytes": _KB,
    "m": _MB, "mb": _MB, "mebibytes": _MB,
    "g": _GB, "gb": _GB, "gibibytes": _GB,
    "t": 1024 * _GB, "tb": 1024 * _GB,
}  # fmt: skip


def parse_memory_size(value: int | str) -> int:
    """Bytes of a Flink MemorySize (``64mb``, ``"128 kb"``, ``1gb`` or an int)."""
    if isinstance(value, bool):
        raise ValueError(f"Expected a memory size, got {value!r}")
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(str(value).lower())
    if not match or match.group(2) not in _SIZE_UNITS:
        raise ValueError(f"Cannot parse memory size {value!r} (use e.g. '64mb', '128kb', '1gb')")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)]


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"RocksDB option {name!r} needs a boolean, got {value!r}")


def _normalise(name: str, value: Any) -> tuple[str, Any]:
    """(setting name, typed value) for one user option; ``ValueError`` when unknown or bad."""
    setting = _FLINK_KEYS.get(name)
    if setting is None:
        setting = name[4:] if name.startswith("set_") else name
    if setting in _MEMORY_SETTINGS:
        return setting, parse_memory_size(value)
    if setting in _INT_SETTINGS:
        try:
            return setting, int(value)
        except (TypeError, ValueError):
            raise ValueError(f"RocksDB option {name!r} needs an integer, got {value!r}") from None
    if setting in _BOOL_SETTINGS:
        return setting, _parse_bool(name, value)
    if setting == "compaction_style":
        style = str(value).strip().lower()
        if style not in _COMPACTION_STYLES:
            raise ValueError(f"Unknown compaction style {value!r}; use LEVEL, UNIVERSAL or FIFO")
        return setting, style
    if setting == "compression_type":
        ctype = str(value).strip().lower().removesuffix("_compression")
        if ctype == "no":
            ctype = "none"
        if ctype not in _COMPRESSION_TYPES:
            raise ValueError(f"Unknown compression type {value!r}")
        return setting, ctype
    if setting == "db_log_dir":
        return setting, str(value)
    if hasattr(rocksdict.Options, f"set_{setting}"):
        return setting, value
    raise ValueError(
        f"Unknown RocksDB option {name!r}: use a state.backend.rocksdb.* key "
        f"({', '.join(sorted(_FLINK_KEYS))}) or a rocksdict Options setter name"
    )


def effective_settings(
    predefined_options: int = PredefinedOptions.DEFAULT,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings applied for a profile plus user options (user options win)."""
    PredefinedOptions.name_of(predefined_options)
    settings = dict(_PROFILES[int(predefined_options)])
    for name, value in (options or {}).items():
        key, typed = _normalise(name, value)
        settings[key] = typed
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
            table.set_bloom_filter(
                int(table_settings.get("bloom_filter_bits_per_key", 10)),
                bool(table_settings.get("bloom_filter_block_based_mode", False)),
            )
        opts.set_block_based_table_factory(table)
    return opts
