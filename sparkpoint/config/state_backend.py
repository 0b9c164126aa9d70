"""State backend options: which backend holds working state, and Flink's RocksDB keys.

The ``state.backend.rocksdb.*`` tuning keys are given to
``EmbeddedRocksDBStateBackend.set_options({...})``; unset ones keep the predefined profile's
value, or RocksDB's own default.
"""

from __future__ import annotations

from sparkpoint.config.option import (
    BOOLEAN,
    DURATION,
    MEMORY_SIZE,
    POSITIVE_MEMORY_SIZE,
    STRING,
    ConfigOption,
    OptionGroup,
    enum_type,
    float_type,
    int_type,
)

__all__ = ["RocksDBOptions", "StateBackendOptions"]

_COMPRESSIONS = ("none", "snappy", "zlib", "bz2", "lz4", "lz4hc", "zstd")


class StateBackendOptions(OptionGroup):
    """Which state backend holds working state."""

    TITLE = "State backend"

    STATE_BACKEND = ConfigOption(
        "state.backend.type",
        enum_type(
            "hashmap",
            "rocksdb",
            aliases={"heap": "hashmap", "filesystem": "hashmap", "jobmanager": "hashmap"},
        ),
        "hashmap",
        "hashmap (objects on the Python worker's heap) or rocksdb (a local RocksDB per "
        "subtask); the 1.x names heap, filesystem and jobmanager mean hashmap.",
        ("state.backend",),
    )
    CHANGELOG_ENABLED = ConfigOption(
        "state.backend.changelog.enabled",
        BOOLEAN,
        False,
        "Changelog checkpoints (Flink's changelog state backend): a checkpoint references "
        "the latest materialization (a snapshot of the keyed state, taken periodically) plus "
        "the changes of every epoch since, so it writes only the last epochs' changes. "
        "Needs sparkpoint.state.changelog.enabled; savepoints are always full snapshots.",
    )
    PERIODIC_MATERIALIZE_INTERVAL = ConfigOption(
        "state.backend.changelog.periodic-materialize.interval",
        DURATION,
        600_000,
        "With changelog checkpoints: the time after a materialization from which the next "
        "checkpoint materializes again (snapshots the keyed state). Shorter: smaller "
        "changelogs to restore, more snapshots written.",
    )
    PERIODIC_MATERIALIZE_ENABLED = ConfigOption(
        "state.backend.changelog.periodic-materialize.enabled",
        BOOLEAN,
        True,
        "With changelog checkpoints: whether to materialize periodically. Off: only a "
        "failover, a missing changelog entry or too many inline entries make a checkpoint "
        "materialize, so the changelog a restore replays keeps growing.",
    )
    MATERIALIZATION_MAX_FAILURES_ALLOWED = ConfigOption(
        "state.backend.changelog.max-failures-allowed",
        int_type(minimum=1),
        3,
        "With changelog checkpoints: periodic materializations that may fail in a row; "
        "the one that reaches this count fails the job over (the restart strategy "
        "applies). Each failure waits a materialization interval before the next attempt.",
    )
    MATERIALIZATION_MAX_UPLOAD_RATE: ConfigOption[int | None] = ConfigOption(
        "sparkpoint.state.changelog.materialization.max-upload-rate",
        POSITIVE_MEMORY_SIZE,
        None,
        "With changelog checkpoints: the most bytes per second one keyed subtask uploads "
        "for a periodic materialization, which runs in the background while checkpoints "
        "go on referencing the previous one (e.g. 8 mb: at most 8 MiB per second); unset: "
        "no limit.",
    )


def _unset(what: str) -> str:
    return f"{what}; unset: the predefined profile's value or RocksDB's default."


class RocksDBOptions(OptionGroup):
    """Flink's ``RocksDBConfigurableOptions`` keys that sparkpoint applies to rocksdict."""

    TITLE = "RocksDB"

    CHECKPOINT_TRANSFER_THREAD_NUM = ConfigOption(
        "state.backend.rocksdb.checkpoint.transfer.thread.num",
        int_type(minimum=1),
        4,
        "Threads that upload and download files in RocksDB snapshots and restores.",
    )
    MAX_BACKGROUND_THREADS: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.thread.num",
        int_type(minimum=1),
        None,
        _unset("Background flush and compaction threads"),
    )
    MAX_OPEN_FILES: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.files.open",
        int_type(minimum=-1),
        None,
        _unset("Files RocksDB may keep open (-1: no limit)"),
    )
    LOG_DIR: ConfigOption[str | None] = ConfigOption(
        "state.backend.rocksdb.log.dir",
        STRING,
        None,
        _unset("Directory of RocksDB's info log"),
    )
    LOG_MAX_FILE_SIZE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.log.max-file-size",
        MEMORY_SIZE,
        None,
        _unset("Largest info log file"),
    )
    LOG_FILE_NUM: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.log.file-num",
        int_type(minimum=1),
        None,
        _unset("Info log files kept"),
    )
    COMPACTION_STYLE: ConfigOption[str | None] = ConfigOption(
        "state.backend.rocksdb.compaction.style",
        enum_type("LEVEL", "UNIVERSAL", "FIFO"),
        None,
        "Compaction style; unset: the predefined profile's value, else UNIVERSAL (Flink's "
        "default is LEVEL: every epoch flushes a file, which levelled compaction merges into "
        "the level holding all the state). With UNIVERSAL, compactions start at 8 sorted "
        "runs unless the rocksdict option level_zero_file_num_compaction_trigger is set.",
    )
    USE_DYNAMIC_LEVEL_SIZE: ConfigOption[bool | None] = ConfigOption(
        "state.backend.rocksdb.compaction.level.use-dynamic-size",
        BOOLEAN,
        None,
        _unset("Whether level sizes are dynamic (level_compaction_dynamic_level_bytes)"),
    )
    TARGET_FILE_SIZE_BASE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.compaction.level.target-file-size-base",
        MEMORY_SIZE,
        None,
        _unset("Target SST file size at level 1"),
    )
    MAX_SIZE_LEVEL_BASE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.compaction.level.max-size-level-base",
        MEMORY_SIZE,
        None,
        _unset("Total size of level 1"),
    )
    WRITE_BUFFER_SIZE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.writebuffer.size",
        MEMORY_SIZE,
        None,
        _unset("Size of one memtable"),
    )
    MAX_WRITE_BUFFER_NUMBER: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.writebuffer.count",
        int_type(minimum=1),
        None,
        _unset("Memtables held in memory"),
    )
    MIN_WRITE_BUFFER_NUMBER_TO_MERGE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.writebuffer.number-to-merge",
        int_type(minimum=1),
        None,
        _unset("Memtables merged before a flush"),
    )
    BLOCK_SIZE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.block.blocksize",
        MEMORY_SIZE,
        None,
        _unset("Data block size"),
    )
    METADATA_BLOCK_SIZE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.block.metadata-blocksize",
        MEMORY_SIZE,
        None,
        _unset("Metadata (index) block size"),
    )
    BLOCK_CACHE_SIZE: ConfigOption[int | None] = ConfigOption(
        "state.backend.rocksdb.block.cache-size",
        MEMORY_SIZE,
        None,
        _unset("Block cache size"),
    )
    USE_BLOOM_FILTER = ConfigOption(
        "state.backend.rocksdb.use-bloom-filter",
        BOOLEAN,
        True,
        "Whether SST files carry a bloom filter (on by default, unlike Flink: point reads "
        "skip the files that cannot hold their key).",
    )
    BLOOM_FILTER_BITS_PER_KEY = ConfigOption(
        "state.backend.rocksdb.bloom-filter.bits-per-key",
        float_type(minimum=1.0),
        10.0,
        "Bits per key of the bloom filter.",
    )
    BLOOM_FILTER_BLOCK_BASED_MODE = ConfigOption(
        "state.backend.rocksdb.bloom-filter.block-based-mode",
        BOOLEAN,
        False,
        "Whether the bloom filter is block-based rather than full.",
    )
    COMPRESSION_TYPE: ConfigOption[str | None] = ConfigOption(
        "state.backend.rocksdb.compression.type",
        enum_type(
            *_COMPRESSIONS,
            aliases={
                "no": "none",
                "no_compression": "none",
                "bzlib2": "bz2",
                **{f"{c}_compression": c for c in _COMPRESSIONS[1:]},
                "bzlib2_compression": "bz2",
            },
        ),
        None,
        _unset("Compression of SST blocks (Flink's `*_COMPRESSION` names are accepted)"),
    )
