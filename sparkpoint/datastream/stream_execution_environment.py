"""``StreamExecutionEnvironment``: configures a job and runs it on Spark (PyFlink's API)."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from sparkpoint.checkpoint.storage_policies import validate_path
from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.common.configuration import Configuration
from sparkpoint.common.execution_config import ExecutionConfig
from sparkpoint.common.ingestion_time import IngestionTimeStrategy
from sparkpoint.common.restart_strategy import RestartStrategies
from sparkpoint.config import (
    CheckpointingOptions,
    CoreOptions,
    ExecutionOptions,
    PipelineOptions,
    RestartStrategyOptions,
    StateBackendOptions,
    apply_options,
    parse_int,
)
from sparkpoint.config.client import client_configuration
from sparkpoint.connectors.collection import CollectionSource
from sparkpoint.connectors.source import Source
from sparkpoint.datastream.checkpoint_config import CheckpointConfig
from sparkpoint.datastream.checkpointing_mode import CheckpointingMode
from sparkpoint.datastream.data_stream import DataStream
from sparkpoint.datastream.execution_mode import RuntimeExecutionMode
from sparkpoint.datastream.functions import SourceFunction
from sparkpoint.datastream.slot_sharing_group import SlotSharingGroup
from sparkpoint.datastream.state_backend_loader import load_state_backend
from sparkpoint.datastream.time_characteristic import TimeCharacteristic
from sparkpoint.errors import JavaFunctionError
from sparkpoint.runtime.driver.job_client import JobClient, JobExecutionResult, run_job
from sparkpoint.runtime.driver.job_master import JobMaster
from sparkpoint.runtime.driver.settings import (
    JobRequest,
    JobSettings,
    build_job_settings,
    check_configuration,
)
from sparkpoint.runtime.graph import Node, NodeKind, build_plan
from sparkpoint.runtime.rest.job_server import serve_job

__all__ = ["RuntimeExecutionMode", "StreamExecutionEnvironment"]

_LOG = logging.getLogger("sparkpoint")


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
        self._configuration = Configuration()
        self._spark = spark
        self._master = master
        self._nodes: list[Node] = []
        self._sinks: list[Node] = []
        self._checkpoint_config = CheckpointConfig()
        self._config = ExecutionConfig()
        self._state_backend: Any = None
        self._default_local_parallelism: int | None = None
        self._time_characteristic = TimeCharacteristic.EventTime
        self._buffer_timeout = ExecutionOptions.BUFFER_TIMEOUT.default
        self._chaining = PipelineOptions.OPERATOR_CHAINING.default
        self._runtime_mode = RuntimeExecutionMode[ExecutionOptions.RUNTIME_MODE.default]
        self._default_savepoint_dir: str | None = None
        self._faults: Any = None
        self._clock: Clock = SYSTEM_CLOCK
        self._slot_sharing_groups: dict[str, SlotSharingGroup] = {}
        if configuration is not None:
            self.configure(configuration)

    # -- creation --------------------------------------------------------------------------
    @staticmethod
    def get_execution_environment(
        configuration: Configuration | None = None,
        spark: Any | None = None,
        master: str | None = None,
    ) -> StreamExecutionEnvironment:
        """A local environment on ``local[*]`` Spark, or on the given session / master URL.

        A job started by ``sparkpoint run`` gets the client's configuration on top of
        ``configuration`` (its ``-s`` restore path, ``-D`` keys), as Flink's context
        environment gets the ``flink run`` options."""
        env = StreamExecutionEnvironment(configuration, spark, master)
        submitted = client_configuration()
        if submitted:
            env.configure(submitted)
        return env

    def _get_spark(self) -> Any:
        if self._spark is None:
            from sparkpoint.runtime.spark.session import get_spark_session

            conf = {k: v for k, v in self._configuration.items() if k.startswith("spark.")}
            self._spark = get_spark_session(self._master, conf)
        return self._spark

    def configure(self, configuration: Mapping[str, Any]) -> StreamExecutionEnvironment:
        """Apply Flink configuration keys (checkpointing, restart strategy, parallelism...).

        Every value is checked first: on an error (``ConfigurationError`` naming the key, the
        value and what is allowed) nothing changes.
        """
        check_configuration(configuration)
        merged = Configuration(self._configuration).add_all(configuration)
        restart = None
        if any(o.is_set(configuration) for o in RestartStrategyOptions.all_options()):
            # Read the merged keys: a later configure() may add only, say, the attempts.
            restart = RestartStrategies.from_configuration(merged)
        self._checkpoint_config.configure(configuration)
        self._configuration = merged
        if restart is not None:
            self._config.set_restart_strategy(restart)
        self._apply_configuration(configuration)
        return self

    def _apply_configuration(self, config: Mapping[str, Any]) -> None:
        """Set what ``config`` names on the API objects (values are checked already)."""
        execution_config = self._config
        apply_options(
            config,
            (
                (CoreOptions.DEFAULT_PARALLELISM, execution_config.set_parallelism),
                (PipelineOptions.MAX_PARALLELISM, execution_config.set_max_parallelism),
                (
                    PipelineOptions.AUTO_WATERMARK_INTERVAL,
                    execution_config.set_auto_watermark_interval,
                ),
                (PipelineOptions.GLOBAL_JOB_PARAMETERS, execution_config.set_global_job_parameters),
                (ExecutionOptions.BUFFER_TIMEOUT, self.set_buffer_timeout),
                (ExecutionOptions.RUNTIME_MODE, self.set_runtime_mode),
                (CheckpointingOptions.SAVEPOINT_DIRECTORY, self.set_default_savepoint_directory),
            ),
        )
        for name in PipelineOptions.REGISTERED_KRYO_TYPES.read(config) or ():
            execution_config.register_kryo_type(name)
        for name in PipelineOptions.REGISTERED_POJO_TYPES.read(config) or ():
            execution_config.register_pojo_type(name)
        if PipelineOptions.OPERATOR_CHAINING.is_set(config):
            self._chaining = PipelineOptions.OPERATOR_CHAINING.read(config)
        if StateBackendOptions.STATE_BACKEND.is_set(config):
            self._state_backend = load_state_backend(self._configuration)

    # -- sources ---------------------------------------------------------------------------
    def _add_node(self, kind: NodeKind, name: str, inputs: list[Node], **kw: Any) -> Node:
        node = Node(len(self._nodes), kind, name, list(inputs), **kw)
        self._nodes.append(node)
        return node

    def from_collection(self, collection: Iterable[Any], type_info: Any = None) -> DataStream:
        """A bounded stream of the collection's elements, in order."""
        items = list(collection)
        node = self._add_node(
            NodeKind.SOURCE,
            "Collection Source",
            [],
            source=CollectionSource(items),
            output_type=type_info,
        )
        return DataStream(self, node)

    def from_source(
        self, source: Source, watermark_strategy: Any, source_name: str, type_info: Any = None
    ) -> DataStream:
        """A stream read from ``source`` (NumberSequenceSource, FileSource, ...)."""
        if not isinstance(source, Source):
            raise TypeError(f"from_source() takes a Source, got {type(source).__name__}")
        node = self._add_node(
            NodeKind.SOURCE, source_name, [], source=source, output_type=type_info
        )
        stream = DataStream(self, node)
        if watermark_strategy is not None and watermark_strategy.generates_watermarks():
            stream = stream.assign_timestamps_and_watermarks(watermark_strategy)
        return stream

    def add_source(
        self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None
    ) -> DataStream:
        """PyFlink's legacy ``add_source`` takes a ``SourceFunction`` (a Java class): refused
        with the replacement, ``from_source`` with a sparkpoint ``Source``."""
        if isinstance(source_func, Source):
            return self.from_source(source_func, None, source_name, type_info)
        what = (
            f"a SourceFunction wrapping the Java class {source_func.source_func!r}"
            if isinstance(source_func, SourceFunction)
            else f"{source_func!r}"
        )
        raise JavaFunctionError(
            f"add_source() got {what}: sparkpoint runs no JVM user code. Use "
            "from_source() with a sparkpoint Source: NumberSequenceSource, FileSource, "
            "SparkStreamSource (any spark.readStream source such as Kafka; "
            "docs/spark-sources.md), or from_collection()."
        )

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

    def get_checkpointing_consistency_mode(self) -> CheckpointingMode:
        """The checkpointing mode (exactly-once or at-least-once), as
        ``get_checkpoint_config().get_checkpointing_consistency_mode()``."""
        return self._checkpoint_config.get_checkpointing_consistency_mode()

    def is_unaligned_checkpoints_enabled(self) -> bool:
        """Whether unaligned checkpoints are enabled (the checkpoint config's setting)."""
        return self._checkpoint_config.is_unaligned_checkpoints_enabled()

    def is_force_unaligned_checkpoints(self) -> bool:
        """Whether unaligned checkpoints are forced (the checkpoint config's setting)."""
        return self._checkpoint_config.is_force_unaligned_checkpoints()

    def set_state_backend(self, state_backend: Any) -> StreamExecutionEnvironment:
        """HashMapStateBackend, EmbeddedRocksDBStateBackend, or a legacy backend (whose
        checkpoint storage is then used unless the checkpoint config sets one)."""
        if not hasattr(state_backend, "create_keyed_state_backend"):
            raise TypeError(f"{type(state_backend).__name__} is not a StateBackend")
        self._state_backend = state_backend
        return self

    def get_state_backend(self) -> Any:
        return self._state_backend

    def enable_changelog_state_backend(self, enabled: bool) -> StreamExecutionEnvironment:
        """Changelog checkpoints (``state.backend.changelog.enabled``): a checkpoint
        references the latest periodic materialization plus every epoch's changes since."""
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be a bool, got {enabled!r}")
        self._configuration.set_boolean(StateBackendOptions.CHANGELOG_ENABLED.key, enabled)
        return self

    def is_changelog_state_backend_enabled(self) -> bool:
        """Whether changelog checkpoints are enabled."""
        return bool(StateBackendOptions.CHANGELOG_ENABLED.read(self._configuration))

    def set_default_savepoint_directory(self, directory: str) -> StreamExecutionEnvironment:
        self._default_savepoint_dir = validate_path(directory, "directory")
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
        self._config.set_parallelism(parse_int(parallelism, "parallelism", minimum=1))
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
        self._default_local_parallelism = parse_int(parallelism, "parallelism", minimum=1)
        return self

    def get_default_local_parallelism(self) -> int:
        return self._default_local_parallelism or _default_parallelism(None)

    def set_restart_strategy(self, restart_strategy_configuration: Any) -> None:
        self._config.set_restart_strategy(restart_strategy_configuration)

    def get_restart_strategy(self) -> Any:
        return self._config.get_restart_strategy()

    def set_stream_time_characteristic(self, characteristic: Any) -> None:
        """ProcessingTime, IngestionTime or EventTime; as in Flink, ProcessingTime sets the
        auto-watermark interval to 0 and the others to its default (200 ms)."""
        self._time_characteristic = TimeCharacteristic.of(characteristic)
        self._config.set_auto_watermark_interval(
            0
            if self._time_characteristic is TimeCharacteristic.ProcessingTime
            else PipelineOptions.AUTO_WATERMARK_INTERVAL.default
        )

    def get_stream_time_characteristic(self) -> Any:
        return self._time_characteristic

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        """The most time records wait before they move on (-1: none). Records move between
        stages once per epoch: in the long-running epoch mode, a job none of whose sinks
        waits for checkpoints to publish starts an epoch at most this often under sparse
        input, unless ``sparkpoint.epoch.interval`` is set (``epoch_pacing.py``); elsewhere
        it is only recorded for ``get_buffer_timeout``."""
        self._buffer_timeout = parse_int(timeout_millis, "timeout_millis", minimum=-1)
        return self

    def get_buffer_timeout(self) -> int:
        return self._buffer_timeout

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        """Recorded for ``is_chaining_enabled``; no counterpart: a stage's operators run in
        one Python task over record batches, and unchaining would not change results."""
        self._chaining = False
        return self

    def is_chaining_of_operators_with_different_max_parallelism_enabled(self) -> bool:
        """Flink's default (True): sparkpoint chains as the plan decides either way."""
        return True

    def is_chaining_enabled(self) -> bool:
        return self._chaining

    def set_runtime_mode(self, execution_mode: Any) -> StreamExecutionEnvironment:
        self._runtime_mode = RuntimeExecutionMode.of(execution_mode)
        return self

    def get_config(self) -> ExecutionConfig:
        return self._config

    def register_type(self, type_class_name: Any) -> None:
        """Recorded in the ExecutionConfig; no counterpart: records are pickled Python objects
        (the same holds for the Kryo serializer registrations below)."""
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

    def add_classpaths(self, *classpaths: str) -> None:
        """Without effect, as ``add_jars``: Java classes come from Spark's classpath."""
        warnings.warn(
            "add_classpaths has no effect: sparkpoint runs on Spark's classpath", stacklevel=2
        )

    def add_python_archive(self, archive_path: str, target_dir: str | None = None) -> None:
        """Without effect: ship an archive (a packed environment) with Spark's
        ``--archives``/``spark.archives`` instead."""
        warnings.warn(
            "add_python_archive has no effect: give the archive to Spark (--archives "
            f"{archive_path}{'#' + target_dir if target_dir else ''})",
            stacklevel=2,
        )

    def set_python_executable(self, python_exec: str) -> None:
        """Without effect: Spark's workers run ``spark.pyspark.python`` (or PYSPARK_PYTHON),
        which must be set before the SparkSession starts."""
        warnings.warn(
            "set_python_executable has no effect: set spark.pyspark.python (or PYSPARK_PYTHON) "
            f"to {python_exec!r} when starting Spark",
            stacklevel=2,
        )

    def register_cached_file(self, file_path: str, name: str, executable: bool = False) -> None:
        """Flink's distributed cache, through Spark's: the file is added with
        ``SparkContext.addFile`` (a function finds it with ``SparkFiles.get`` by its base name;
        ``name`` is not used)."""
        self._get_spark().sparkContext.addFile(file_path)

    def create_input(self, input_format: Any, type_info: Any = None) -> DataStream:
        """Not supported: an ``InputFormat`` is a Java object; use ``from_source`` with a
        ``FileSource`` or another source."""
        raise NotImplementedError(
            "create_input(InputFormat) needs a Java InputFormat, which sparkpoint cannot run: "
            "use from_source(FileSource...) or another source"
        )

    def register_slot_sharing_group(
        self, slot_sharing_group: SlotSharingGroup
    ) -> StreamExecutionEnvironment:
        """Register a slot sharing group's resource spec: operators in the group by name show
        it in ``get_execution_plan`` and ask Spark for its CPU cores per task where Spark can
        (see docs/architecture.md, "Limitations")."""
        if not isinstance(slot_sharing_group, SlotSharingGroup):
            raise TypeError(f"expected a SlotSharingGroup, got {slot_sharing_group!r}")
        self._slot_sharing_groups[slot_sharing_group.get_name()] = slot_sharing_group
        return self

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

        self._stamp_ingestion_time()
        self._resolve_slot_sharing_groups()
        p = self.get_parallelism()
        maxp = self._max_parallelism or compute_default_max_parallelism(p)
        return build_plan(list(self._sinks), p, maxp)

    def _resolve_slot_sharing_groups(self) -> None:
        """Give every operator of a named group the group's resources: from the operators
        that set them, else from ``register_slot_sharing_group``. Two different specs for one
        name fail, as in Flink."""
        specs = {name: g.resources() for name, g in self._slot_sharing_groups.items()}
        from_operators: dict[str, dict[str, Any]] = {}
        for n in self._nodes:
            if n.slot_sharing_group is None or not n.slot_resources:
                continue
            seen = from_operators.setdefault(n.slot_sharing_group, n.slot_resources)
            if seen != n.slot_resources:
                raise ValueError(
                    f"The slot sharing group {n.slot_sharing_group} has been configured with "
                    f"two different resource spec: {seen} and {n.slot_resources}"
                )
        specs.update(from_operators)
        for n in self._nodes:
            if n.slot_sharing_group is not None and not n.slot_resources:
                n.slot_resources = specs.get(n.slot_sharing_group) or None

    def _stamp_ingestion_time(self) -> None:
        """Under IngestionTime every source stamps its records with processing time, unless
        the program gives them timestamps itself (``assign_timestamps_and_watermarks`` right
        behind the source: the program's strategy decides, as in Flink)."""
        ingestion = self._time_characteristic is TimeCharacteristic.IngestionTime
        strategy = IngestionTimeStrategy(self._config.get_auto_watermark_interval())
        for source in [n for n in self._nodes if n.kind is NodeKind.SOURCE]:
            stamped = any(
                n.kind is NodeKind.TIMESTAMPS and any(i is source for i in n.inputs)
                for n in self._nodes
            )
            source.watermark_strategy = strategy if ingestion and not stamped else None

    def _job_request(self) -> JobRequest:
        """The configuration with everything set through the API, and the API's objects."""
        conf = Configuration(self._configuration)
        conf.add_all(self._checkpoint_config.to_dict())
        conf.set_integer(CoreOptions.DEFAULT_PARALLELISM.key, self.get_parallelism())
        if self._max_parallelism is not None:
            conf.set_integer(PipelineOptions.MAX_PARALLELISM.key, self._max_parallelism)
        conf.set_string(ExecutionOptions.RUNTIME_MODE.key, self._runtime_mode.name)
        conf.set_string(
            PipelineOptions.AUTO_WATERMARK_INTERVAL.key,
            f"{self._config.get_auto_watermark_interval()} ms",
        )
        savepoint_dir = self._default_savepoint_dir
        if savepoint_dir is not None:
            conf.set_string(CheckpointingOptions.SAVEPOINT_DIRECTORY.key, savepoint_dir)
        backend = self._state_backend
        return JobRequest(
            configuration=conf,
            state_backend=load_state_backend(conf) if backend is None else backend,
            checkpoint_storage=self._checkpoint_config.get_checkpoint_storage(),
            restart_strategy=self._config.get_restart_strategy(),
            job_parameters={**self._configuration, **self._config.get_global_job_parameters()},
            faults=self._faults,
            buffer_timeout_ms=self._buffer_timeout,
        )

    def _settings(self, job_name: str) -> JobSettings:
        return build_job_settings(job_name, self._job_request())

    def set_clock(self, clock: Clock) -> StreamExecutionEnvironment:
        """sparkpoint: the clock jobs read (processing time of timers and TTL, checkpoint
        intervals, restart delays); tests pass ``sparkpoint.testing.ManualClock``."""
        self._clock = clock
        return self

    def set_fault_injection(self, faults: Any) -> StreamExecutionEnvironment:
        """sparkpoint: inject faults into the jobs this environment runs (a
        ``sparkpoint.testing.Faults``: callbacks on the driver before every epoch run, and
        in tasks after every local state commit). ``None`` removes them."""
        self._faults = faults
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
        return run_job(self._create_master(job_name or "Flink Streaming Job"), serve_job)

    def execute_async(self, job_name: str | None = None) -> JobClient:
        """Start the job in the background; the client controls it."""
        return JobClient(self._create_master(job_name or "Flink Streaming Job"), serve_job)

    def close(self) -> None:
        """Forget the dataflow built so far."""
        self._nodes.clear()
        self._sinks.clear()
