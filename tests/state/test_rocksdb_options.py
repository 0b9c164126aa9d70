"""The RocksDB option profiles and user options really reach RocksDB (read back from OPTIONS)."""

from __future__ import annotations

import glob
import os
import re

import pytest
import rocksdict

from sparkpoint.config import parse_memory_size
from sparkpoint.state.rocksdb.options import (
    PredefinedOptions,
    build_db_options,
    effective_settings,
)


def _options_file_values(db_dir: str) -> dict[str, str]:
    latest = max(glob.glob(os.path.join(db_dir, "OPTIONS-*")), key=os.path.getmtime)
    values: dict[str, str] = {}
    with open(latest) as f:
        for line in f:
            m = re.match(r"\s*([a-z0-9_]+)=(.*)$", line.rstrip())
            if m:
                values.setdefault(m.group(1), m.group(2))
    return values


def _open_and_read(tmp_path, predefined: int, options: dict | None = None):
    opts = build_db_options(predefined, options)
    path = str(tmp_path / f"db{predefined}")
    db = rocksdict.Rdict(path, opts, column_families={"default": opts})
    db.put(b"k", b"v")
    cache = db.property_int_value("rocksdb.block-cache-capacity")
    db.close()
    return _options_file_values(path), cache


def test_constants_match_pyflink() -> None:
    assert PredefinedOptions.DEFAULT == 0
    assert PredefinedOptions.SPINNING_DISK_OPTIMIZED == 1
    assert PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM == 2
    assert PredefinedOptions.FLASH_SSD_OPTIMIZED == 3
    assert PredefinedOptions.name_of(2) == "SPINNING_DISK_OPTIMIZED_HIGH_MEM"


def test_high_mem_profile_is_applied(tmp_path) -> None:
    values, cache = _open_and_read(tmp_path, PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM)
    assert values["max_open_files"] == "-1"
    assert values["use_fsync"] == "false"
    assert values["target_file_size_base"] == str(256 * 1024 * 1024)
    assert values["max_bytes_for_level_base"] == str(1024**3)
    assert values["write_buffer_size"] == str(64 * 1024 * 1024)
    assert values["min_write_buffer_number_to_merge"] == "3"
    assert values["max_write_buffer_number"] == "4"
    assert values["level_compaction_dynamic_level_bytes"] == "true"
    assert values["compaction_style"] == "kCompactionStyleLevel"
    assert values["block_size"] == str(128 * 1024)
    assert cache == 256 * 1024 * 1024
    # increase_parallelism(4) sets 4 background jobs.
    assert values["max_background_jobs"] == "4"


def test_spinning_disk_and_flash_profiles(tmp_path) -> None:
    values, _ = _open_and_read(tmp_path, PredefinedOptions.SPINNING_DISK_OPTIMIZED)
    assert values["max_open_files"] == "-1"
    assert values["level_compaction_dynamic_level_bytes"] == "true"
    assert values["max_background_jobs"] == "4"
    values, _ = _open_and_read(tmp_path, PredefinedOptions.FLASH_SSD_OPTIMIZED)
    assert values["max_open_files"] == "-1"
    assert values["max_background_jobs"] == "4"
    assert values["use_fsync"] == "false"


def test_default_profile_sets_sparkpoint_defaults_and_keeps_rocksdb_ones(tmp_path) -> None:
    values, cache = _open_and_read(tmp_path, PredefinedOptions.DEFAULT)
    # use_fsync, bloom filters and universal compaction (compacting at 8 sorted runs) are
    # set; the rest are RocksDB 9's own defaults.
    assert values["use_fsync"] == "false"
    assert values["compaction_style"] == "kCompactionStyleUniversal"
    assert values["level0_file_num_compaction_trigger"] == "8"
    assert values["max_background_jobs"] == "2"
    assert values["block_size"] == "4096"
    assert values["write_buffer_size"] == str(64 * 1024 * 1024)
    assert cache == 32 * 1024 * 1024


def test_user_options_override_profile(tmp_path) -> None:
    values, cache = _open_and_read(
        tmp_path,
        PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM,
        {
            "state.backend.rocksdb.writebuffer.size": "16mb",
            "state.backend.rocksdb.block.cache-size": "32 mb",
            "state.backend.rocksdb.files.open": 500,
            "set_max_background_jobs": 2,
            "state.backend.rocksdb.compaction.style": "UNIVERSAL",
        },
    )
    assert values["write_buffer_size"] == str(16 * 1024 * 1024)
    assert values["max_open_files"] == "500"
    assert values["max_background_jobs"] == "2"
    assert values["compaction_style"] == "kCompactionStyleUniversal"
    assert cache == 32 * 1024 * 1024


def test_options_survive_reopen(tmp_path) -> None:
    path = str(tmp_path / "db")
    opts = build_db_options(PredefinedOptions.DEFAULT)
    rocksdict.Rdict(path, opts, column_families={"default": opts}).close()
    opts = build_db_options(PredefinedOptions.DEFAULT, {"write_buffer_size": "8mb"})
    db = rocksdict.Rdict(path, opts, column_families={"default": opts})
    db.close()
    assert _options_file_values(path)["write_buffer_size"] == str(8 * 1024 * 1024)


def test_bloom_filters_are_on_unless_turned_off(tmp_path) -> None:
    for options, policy in (
        ({}, "bloomfilter"),
        ({"state.backend.rocksdb.use-bloom-filter": "false"}, "nullptr"),
    ):
        path = str(tmp_path / policy)
        opts = build_db_options(PredefinedOptions.DEFAULT, options)
        rocksdict.Rdict(path, opts, column_families={"default": opts}).close()
        assert _options_file_values(path)["filter_policy"] == policy


def test_effective_settings_and_sizes() -> None:
    settings = effective_settings(PredefinedOptions.FLASH_SSD_OPTIMIZED, {"max_open_files": "7"})
    assert settings == {
        "increase_parallelism": 4,
        "use_fsync": False,
        "max_open_files": 7,
        "use_bloom_filter": True,
        "compaction_style": "universal",
        "level_zero_file_num_compaction_trigger": 8,
    }
    assert not effective_settings(
        PredefinedOptions.DEFAULT, {"state.backend.rocksdb.use-bloom-filter": "false"}
    )["use_bloom_filter"]
    assert parse_memory_size("64mb") == 64 * 1024 * 1024
    assert parse_memory_size("128 kb") == 128 * 1024
    assert parse_memory_size("1gb") == 1024**3
    assert parse_memory_size(12) == 12


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"state.backend.rocksdb.nope": 1}, "Unknown RocksDB option"),
        (
            {"state.backend.rocksdb.writebuffer.size": "lots"},
            "'lots' for 'state.backend.rocksdb.writebuffer.size': expected a memory size",
        ),
        ({"state.backend.rocksdb.files.open": "x"}, "'x' for .*files.open': expected an integer"),
        (
            {"state.backend.rocksdb.compaction.style": "tiered"},
            "'tiered' for .*compaction.style': expected one of LEVEL, UNIVERSAL, FIFO",
        ),
        (
            {"state.backend.rocksdb.use-bloom-filter": "maybe"},
            "'maybe' for .*use-bloom-filter': expected 'true' or 'false'",
        ),
        ({"set_use_fsync": "yes"}, "'yes' for 'set_use_fsync': expected 'true' or 'false'"),
    ],
)
def test_bad_options_are_refused(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        effective_settings(PredefinedOptions.DEFAULT, options)


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="Unknown PredefinedOptions value 9"):
        build_db_options(9)


def test_compaction_trigger_default_is_only_for_universal_compaction(tmp_path) -> None:
    # A profile or user that asks for levelled compaction keeps RocksDB's level-0 trigger.
    values, _ = _open_and_read(tmp_path, PredefinedOptions.SPINNING_DISK_OPTIMIZED)
    assert values["compaction_style"] == "kCompactionStyleLevel"
    assert values["level0_file_num_compaction_trigger"] == "4"
    level = effective_settings(options={"state.backend.rocksdb.compaction.style": "LEVEL"})
    assert level["compaction_style"] == "level"
    assert "level_zero_file_num_compaction_trigger" not in level
    # A trigger the user sets wins over the default.
    own = effective_settings(options={"set_level_zero_file_num_compaction_trigger": 3})
    assert own["compaction_style"] == "universal"
    assert own["level_zero_file_num_compaction_trigger"] == 3
