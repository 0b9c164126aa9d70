"""``StreamExecutionEnvironment``: configures a job and runs it on Spark (PyFlink's API)."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterable
from typing import Any

from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.common.configuration import Configuration
from sparkpoint.common.execution_config import ExecutionConfig
from sparkpoint.connectors.collection import CollectionSource
from sparkpoint.connectors.source import Source
from sparkpoint.datastream.checkpoint_config import CheckpointConfig
from sparkpoint.datastream.checkpointing_mode import CheckpointingMode
from sparkpoint.datastream.data_stream import DataStream
from sparkpoint.datastream.time_characteristic import TimeCharacteristic
from sparkpoint.runtime.coordinator import CheckpointPolicy
from sparkpoint.runtime.graph import Node, build_plan
from sparkpoint.runtime.job_client import JobClient, JobExecutionResult, result_of
from sparkpoint.runtime.job_master import JobMaster, JobSettings

__all__ = ["RuntimeExecutionMode", "StreamExecutionEnvironment"]

_LOG = logging.getLogger("sparkpoint")


class RuntimeExecutionMode:
    """STREAMING emits every update; BATCH emits final results of keyed aggregations."""

    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


def _default_parallelism(spark: Any | None) -> int:
    if spark is not None:
        return max(1, int(spark.sparkContext.defaultParallelism))
    return max(1, os.cpu_count() or 1)


class StreamExecutionEnvironment:
    """The context a streaming program runs in. Spark executes it, epoch by epoch."""

    def __init__(
        self,
        configuration: Configuration | None = None,
        spark: Any | None = None,
        master: str | None = None,
    ) -> None:
        self._configuration = configuration or Configuration()
        self._spark = spark
        self._master = master
        self._nodes: list[Node] = []
        self._sinks: list[Node] = []
        self._checkpoint_config = CheckpointConfig(self._configuration.to_dict())
        self._config = ExecutionConfig()
        self._state_backend: Any = None
        self._default_local_parallelism: int | None = None
        self._time_characteristic = TimeCharacteristic.EventTime
        self._buffer_timeout = 100
        self._chaining = True
        self._runtime_mode = RuntimeExecutionMode.STREAMING
        self._default_savepoint_dir: str | None = None
        # Failure-injection hooks used by sparkpoint.testing (see JobSettings).
        self._before_epoch: Any = None
        self._after_local_commit: Any = None
        self._clock: Clock = SYSTEM_CLOCK
        self._apply_configuration(self._configuration)

    # -- creation --------------------------------------------------------------------------
    @staticmethod
    def get_execution_environment(
        configuration: Configuration | None = None, spark: Any | None = None,
        master: str | None = None,
    ) -> StreamExecutionEnvironment:
        """A local environment on ``local[*]`` Spark, or on the given session / master URL."""
        return StreamExecutionEnvironment(configuration, spark, master)

    def _get_spark(self) -> Any:
        if self._spark is None:
            from sparkpoint.runtime.session import get_spark_session

            conf = {
                k: str(v) for k, v in self._configuration.to_dict().items()
                if k.startswith("spark.")
            }
            self._spark = get_spark_session(self._master, conf)
        return self._spark

    def _apply_configuration(self, configuration: Configuration) -> None:
        conf = configuration.to_dict()
        if "parallelism.default" in conf:
            self.set_parallelism(int(conf["parallelism.default"]))
        if "pipeline.max-parallelism" in conf:
            self.set_max_parallelism(int(conf["pipeline.max-parallelism"]))
        if any(k.startswith("restart-strategy") for k in conf):
            from sparkpoint.common.restart_strategy import RestartStrategies

            # Read the merged keys: a later configure() may add only, say, the attempts.
            strategy = RestartStrategies.from_configuration(self._configuration)
            if strategy is not None:
                self._config.set_restart_strategy(strategy)
        mode = conf.get("execution.runtime-mode", "").upper()
        if mode:
            self._runtime_mode = getattr(RuntimeExecutionMode, mode)
        backend_type = conf.get("state.backend.type", conf.get("state.backend", "")).lower()
        if backend_type:
            from sparkpoint.datastream import state_backend as sb

            if backend_type in ("hashmap", "heap", "filesystem", "jobmanager"):
                self._state_backend = sb.HashMapStateBackend()
            elif backend_type == "rocksdb":
                incremental = conf.get(
                    "execution.checkpointing.incremental", conf.get("state.backend.incremental")
                )
                self._state_backend = sb.EmbeddedRocksDBStateBackend(
                    str(incremental).lower() == "true" if incremental else None
                )
            else:
                raise ValueError(
                    f"Unknown state.backend.type {backend_type!r}: use 'hashmap' or 'rocksdb'"
                )
        self._default_savepoint_dir = conf.get(
            "execution.checkpointing.savepoint-dir", conf.get("state.savepoints.dir")
        )

    def configure(self, configuration: Configuration) -> StreamExecutionEnvironment:
        """Apply Flink configuration keys (checkpointing, restart strategy, parallelism...)."""
        self._configuration.add_all(configuration)
        self._checkpoint_config.configure(configuration.to_dict())
        self._apply_configuration(configuration)
        return self

    # -- sources ---------------------------------------------------------------------------
    def _add_node(self, kind: str, name: str, inputs: list[Node], **kw: Any) -> Node:
        node = Node(len(self._nodes), kind, name, list(inputs), **kw)
        self._nodes.append(node)
        return node

    def from_collection(self, collection: Iterable[Any], type_info: Any = None) -> DataStream:
        """A bounded stream of the collection's elements, in order."""
        items = list(collection)
        node = self._add_node("source", "Collection Source", [], source=CollectionSource(items),
                              output_type=type_info)
        return DataStream(self, node)

    def from_source(
        self, source: Source, watermark_strategy: Any, source_name: str, type_info: Any = None
    ) -> DataStream:
        """A stream read from ``source`` (NumberSequenceSource, FileSource, ...)."""
        if not isinstance(source, Source):
            raise TypeError(f"from_source() takes a Source, got {type(source).__name__}")
        node = self._add_node("source", source_name, [], source=source, output_type=type_info)
        stream = DataStream(self, node)
        if watermark_strategy is not None and watermark_strategy.generates_watermarks():
            stream = stream.assign_timestamps_and_watermarks(watermark_strategy)
        return stream

    def read_text_file(self, file_path: str, charset_name: str = "UTF-8") -> DataStream:
        """The lines of a text file (or of the files of a directory)."""
        from sparkpoint.connectors.file_source import FileSource, StreamFormat

        src = FileSource.for_record_stream_format(
            StreamFormat.text_line_format(charset_name), file_path
        ).build()
        return self.from_source(src, None, f"Read Text File {file_path}")

    # -- checkpointing ---------------------------------------------------------------------
    def enable_checkpointing(self, interval: int, mode: Any = None) -> StreamExecutionEnvironment:
        """Checkpoint every ``interval`` milliseconds, EXACTLY_ONCE unless ``mode`` says so."""
        self._checkpoint_config.set_checkpoint_interval(interval)
        if mode is not None:
            self._checkpoint_config.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def get_checkpoint_interval(self) -> int:
        return self._checkpoint_config.get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self._checkpoint_config.get_checkpointing_mode()

    def set_state_backend(self, state_backend: Any) -> StreamExecutionEnvironment:
        """HashMapStateBackend, EmbeddedRocksDBStateBackend, or a legacy backend (whose
        checkpoint storage is then used unless the checkpoint config sets one)."""
        if not hasattr(state_backend, "create_keyed_state_backend"):
            raise TypeError(f"{type(state_backend).__name__} is not a StateBackend")
        self._state_backend = state_backend
        return self

    def get_state_backend(self) -> Any:
        return self._state_backend

    def set_default_savepoint_directory(self, directory: str) -> StreamExecutionEnvironment:
        self._default_savepoint_dir = directory
        return self

    def get_default_savepoint_directory(self) -> str | None:
        return self._default_savepoint_dir

    # -- parallelism and the rest of the configuration -------------------------------------
    # Parallelism, max parallelism and restart strategy live in the ExecutionConfig, as in
    # Flink: ``env.set_parallelism(n)`` and ``env.get_config().set_parallelism(n)`` are one.
    @property
    def _parallelism(self) -> int | None:
        p = self._config.get_parallelism()
        return None if p == ExecutionConfig.PARALLELISM_DEFAULT else p

    @property
    def _max_parallelism(self) -> int | None:
        mp = self._config.get_max_parallelism()
        return None if mp == -1 else mp

    @property
    def _restart_strategy(self) -> Any:
        return self._config.get_restart_strategy()

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"The parallelism must be at least 1, got {parallelism}")
        self._config.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        if self._parallelism is not None:
            return self._parallelism
        if self._default_local_parallelism is not None:
            return self._default_local_parallelism
        return _default_parallelism(self._spark)

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        if not isinstance(max_parallelism, int) or not 0 < max_parallelism <= 32767:
            raise ValueError(
                f"maxParallelism is out of bounds 0 < maxParallelism <= 32767. "
                f"Found: {max_parallelism}"
            )
        self._config.set_max_parallelism(max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return self._config.get_max_parallelism()

    def set_default_local_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        if parallelism < 1:
            raise ValueError("The parallelism must be at least 1")
        self._default_local_parallelism = parallelism
        return self

    def get_default_local_parallelism(self) -> int:
        return self._default_local_parallelism or _default_parallelism(None)

    def set_restart_strategy(self, restart_strategy_configuration: Any) -> None:
        self._config.set_restart_strategy(restart_strategy_configuration)

    def get_restart_strategy(self) -> Any:
        return self._config.get_restart_strategy()

    def set_stream_time_characteristic(self, characteristic: Any) -> None:
        self._time_characteristic = characteristic

    def get_stream_time_characteristic(self) -> Any:
        return self._time_characteristic

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        if timeout_millis < -1:
            raise ValueError("Timeout of buffer must be non-negative or -1")
        self._buffer_timeout = timeout_millis
        return self

    def get_buffer_timeout(self) -> int:
        return self._buffer_timeout

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return self._chaining

    def set_runtime_mode(self, execution_mode: Any) -> StreamExecutionEnvironment:
        self._runtime_mode = execution_mode
        return self

    def get_config(self) -> ExecutionConfig:
        return self._config

    def register_type(self, type_class_name: Any) -> None:
        self._config.register_kryo_type(type_class_name)

    def register_type_with_kryo_serializer(
        self, type_class_name: Any, serializer_class_name: Any
    ) -> None:
        self._config.register_type_with_kryo_serializer(type_class_name, serializer_class_name)

    def add_default_kryo_serializer(self, type_class_name: Any, serializer_class_name: Any) -> None:
        self._config.add_default_kryo_serializer(type_class_name, serializer_class_name)

    def add_jars(self, *jars_path: str) -> None:
        warnings.warn("add_jars has no effect: sparkpoint runs on Spark's classpath", stacklevel=2)

    def add_python_file(self, file_path: str) -> None:
        self._get_spark().sparkContext.addPyFile(file_path)

    def set_python_requirements(self, requirements_file_path: str, *a: Any) -> None:
        warnings.warn("install Python requirements on the Spark workers yourself", stacklevel=2)

    def get_execution_plan(self) -> str:
        """The dataflow as JSON (nodes, ship strategies, parallelism)."""
        return self._plan().to_json(self.get_parallelism())

    # -- running ---------------------------------------------------------------------------
    def _plan(self) -> Any:
        if not self._sinks:
            raise RuntimeError(
                "No operators defined in streaming topology. Cannot execute (add a sink: "
                "print(), sink_to(...), execute_and_collect())."
            )
        from sparkpoint.state.key_groups import compute_default_max_parallelism

        p = self.get_parallelism()
        maxp = self._max_parallelism or compute_default_max_parallelism(p)
        return build_plan(list(self._sinks), p, maxp)

    def _checkpoint_storage(self) -> Any:
        storage = self._checkpoint_config.get_checkpoint_storage()
        backend = self._state_backend
        if storage is None and backend is not None and hasattr(backend, "get_checkpoint_storage"):
            storage = backend.get_checkpoint_storage()
        if storage is None:
            from sparkpoint.datastream.checkpoint_storage import JobManagerCheckpointStorage

            storage = JobManagerCheckpointStorage()
        conf = dict(self._configuration.to_dict())
        if self._default_savepoint_dir and "execution.checkpointing.savepoint-dir" not in conf:
            conf["execution.checkpointing.savepoint-dir"] = self._default_savepoint_dir
        return storage.configure(conf)

    def _settings(self, job_name: str) -> JobSettings:
        cc = self._checkpoint_config
        conf = self._configuration.to_dict()
        policy = CheckpointPolicy(
            interval_ms=cc.get_checkpoint_interval(),
            timeout_ms=cc.get_checkpoint_timeout(),
            min_pause_ms=cc.get_min_pause_between_checkpoints(),
            max_concurrent=cc.get_max_concurrent_checkpoints(),
            tolerable_failures=cc.get_tolerable_checkpoint_failure_number(),
            retention=cc.get_externalized_checkpoint_retention().name,
            prefer_checkpoint_for_recovery=cc.is_prefer_checkpoint_for_recovery(),
        )
        backend = self._state_backend
        if backend is None:
            from sparkpoint.datastream.state_backend import HashMapStateBackend

            backend = HashMapStateBackend()
        from sparkpoint.state.key_groups import compute_default_max_parallelism

        p = self.get_parallelism()
        restore = conf.get("execution.state-recovery.path", conf.get("execution.savepoint.path"))
        ignore = conf.get(
            "execution.state-recovery.ignore-unclaimed-state",
            conf.get("execution.savepoint.ignore-unclaimed-state", "false"),
        )
        settings = JobSettings(
            job_name=job_name,
            parallelism=p,
            max_parallelism=self._max_parallelism or compute_default_max_parallelism(p),
            explicit_max_parallelism=self._max_parallelism is not None,
            policy=policy,
            checkpoint_storage=self._checkpoint_storage(),
            state_backend=backend,
            restart_strategy=self._restart_strategy,
            num_retained=cc.get_num_retained_checkpoints(),
            batch_mode=self._runtime_mode == RuntimeExecutionMode.BATCH,
            restore_path=restore,
            allow_non_restored_state=str(ignore).lower() == "true",
            max_records_per_split=int(conf.get("sparkpoint.epoch.max-records-per-split", 100_000)),
            job_parameters={
                **{k: str(v) for k, v in conf.items()},
                **self._config.get_global_job_parameters(),
            },
            before_epoch=self._before_epoch,
            after_local_commit=self._after_local_commit,
        )
        if "sparkpoint.local-state.dir" in conf:
            settings.local_root = str(conf["sparkpoint.local-state.dir"])
        return settings

    def set_clock(self, clock: Clock) -> StreamExecutionEnvironment:
        """sparkpoint: the clock jobs read (processing time of timers and TTL, checkpoint
        intervals, restart delays); tests pass ``sparkpoint.testing.ManualClock``."""
        self._clock = clock
        return self

    def _create_master(self, job_name: str) -> JobMaster:
        spark = self._get_spark()
        plan = self._plan()
        master = JobMaster(spark, plan, self._settings(job_name), self._clock)
        # As in Flink, a job takes the dataflow built so far; the next program starts anew.
        self._nodes = []
        self._sinks = []
        return master

    def execute(self, job_name: str | None = None) -> JobExecutionResult:
        """Run the job to its end (bounded sources) and return its result."""
        master = self._create_master(job_name or "Flink Streaming Job")
        out = master.run()
        self._last_master = master
        return result_of(master, out)

    def execute_async(self, job_name: str | None = None) -> JobClient:
        """Start the job in the background; the client controls it."""
        master = self._create_master(job_name or "Flink Streaming Job")
        self._last_master = master
        return JobClient(master)

    def close(self) -> None:
        """Forget the dataflow built so far."""
        self._nodes.clear()
        self._sinks.clear()
