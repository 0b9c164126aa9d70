"""The benchmark's pipeline as one PyFlink DataStream program, run by PyFlink or by sparkpoint
by its import prefix (``--api pyflink`` or ``--api sparkpoint``): KafkaSource -> parse ->
key_by -> count in ValueState -> KafkaSink EXACTLY_ONCE, checkpoints every second.

Run as a script (PyFlink's interpreter has no sparkpoint): ``python datastream_job.py --api
... --bootstrap ... --source ... --sink ... --checkpoints <dir> [--jar <connector jar>]
[--pyflink-mode thread|process] [--conf key=value ...]``. It runs until it is killed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import site
import sys
from typing import Any


def pyflink_settings(mode: str, overrides: list[str]) -> dict[str, str]:
    """PyFlink's configuration for this pipeline (1M keys, 1 s checkpoints, exactly-once),
    in Python worker ``mode`` (``thread`` or ``process``), then ``key=value`` overrides."""
    settings = {
        # Flink starts its Python workers with `python` from PATH unless told otherwise.
        "python.executable": sys.executable,
        "python.execution-mode": mode,
        # Keyed state on the JVM heap (1M counters fit), snapshots written to the checkpoint
        # directory rather than sent to the JobManager.
        "state.backend.type": "hashmap",
        "execution.checkpointing.storage": "filesystem",
        # Under backpressure an aligned barrier waits behind every buffer in flight; an
        # unaligned one overtakes them, so a checkpoint (and the sink's commit) stays ~1 s.
        "execution.checkpointing.unaligned.enabled": "true",
        # Process mode only: a checkpoint barrier waits until the Python worker has finished
        # its bundle, so a bundle is kept well under the checkpoint interval (defaults:
        # 100,000 records or 1 s) ...
        "python.fn-execution.bundle.size": "5000",
        "python.fn-execution.bundle.time": "100",
        # python.state.cache-size stays at its 1,000 keys: the worker commits every cached
        # key's state at the end of each bundle, so a cache of 1M keys made each bundle cost
        # a pass over 1M entries (59 records/s in a trial), and with 1M random keys the first
        # read of a key misses whatever the cache's size.
    }
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--conf wants key=value, got {item!r}")
        settings[key] = value
    return settings


def build(api: str, args: argparse.Namespace) -> Any:
    """The environment with the pipeline on it, in ``api``'s classes."""
    common = importlib.import_module(f"{api}.common")
    datastream = importlib.import_module(f"{api}.datastream")
    kafka = importlib.import_module(f"{api}.datastream.connectors.kafka")
    state = importlib.import_module(f"{api}.datastream.state")
    types = common.Types

    class CountPerKey(datastream.KeyedProcessFunction):  # type: ignore[misc,name-defined]
        """Counts records per key in ValueState; emits ``"key,count,producer ms"`` each."""

        def open(self, runtime_context: Any) -> None:
            descriptor = state.ValueStateDescriptor("count", types.LONG())
            self.count = runtime_context.get_state(descriptor)

        def process_element(self, value: Any, ctx: Any) -> Any:
            key, _sep, ms = value.partition(",")
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            yield f"{key},{c},{ms}"

    if api == "pyflink":
        # Thread mode runs CPython inside the JVM (PEMJA) on the base installation's sys.path,
        # without a virtualenv's packages (pyflink, pemja): the JVM, started by the first Java
        # object (the Configuration below), passes them on through PYTHONPATH.
        paths = [*site.getsitepackages(), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    conf = common.Configuration()
    conf.set_string("execution.checkpointing.dir", "file://" + os.path.abspath(args.checkpoints))
    if api == "pyflink":
        for key, value in pyflink_settings(args.pyflink_mode, args.conf).items():
            conf.set_string(key, value)
    if api == "sparkpoint":
        conf.set_string("sparkpoint.local-state.dir", os.path.abspath(args.checkpoints) + "-ls")
        for item in args.conf:
            key, _sep, value = item.partition("=")
            conf.set_string(key, value)
    env = datastream.StreamExecutionEnvironment.get_execution_environment(conf)
    if args.jar:
        env.add_jars(f"file://{os.path.abspath(args.jar)}")
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(
        getattr(args, "checkpoint_interval_ms", 1000), datastream.CheckpointingMode.EXACTLY_ONCE
    )
    guarantee = getattr(kafka.DeliveryGuarantee, getattr(args, "guarantee", "EXACTLY_ONCE"))
    # Kafka client properties by Java's names (security.protocol, sasl.jaas.config, ...),
    # the same for the source and the sink, as a PyFlink program sets them.
    properties = dict(item.partition("=")[::2] for item in getattr(args, "property", []))
    source_builder = (
        kafka.KafkaSource.builder()
        .set_bootstrap_servers(args.bootstrap)
        .set_topics(args.source)
        .set_group_id(f"{api}-bench")
        .set_starting_offsets(kafka.KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(common.SimpleStringSchema())
    )
    sink_builder = (
        kafka.KafkaSink.builder()
        .set_bootstrap_servers(args.bootstrap)
        .set_record_serializer(
            kafka.KafkaRecordSerializationSchema.builder()
            .set_topic(args.sink)
            .set_value_serialization_schema(common.SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(f"{api}-bench")
        # Below the broker's transaction.max.timeout.ms (15 min; Flink asks for 1 h).
        .set_property("transaction.timeout.ms", "600000")
    )
    for key, value in properties.items():
        source_builder.set_property(key, value)
        sink_builder.set_property(key, value)
    source, sink = source_builder.build(), sink_builder.build()
    (
        env.from_source(source, common.WatermarkStrategy.no_watermarks(), "kafka")
        .uid("source")
        .key_by(lambda line: line.partition(",")[0], key_type=types.STRING())
        .process(CountPerKey(), output_type=types.STRING())
        .uid("count")
        .sink_to(sink)
        .uid("sink")
    )
    return env


def main() -> None:
    if os.environ.get("KAFKA_LATENCY_LOG_EPOCHS"):  # every epoch's line in the engine's log
        import logging

        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("sparkpoint.job").setLevel(logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", choices=["pyflink", "sparkpoint"], required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--jar", default="")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--pyflink-mode", choices=["thread", "process"], default="thread")
    parser.add_argument(
        "--conf", action="append", default=[], help="the engine's key=value (repeatable)"
    )
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        help="a Kafka client key=value for the source and the sink (repeatable)",
    )
    parser.add_argument(
        "--guarantee", choices=["EXACTLY_ONCE", "AT_LEAST_ONCE"], default="EXACTLY_ONCE"
    )
    args = parser.parse_args()
    build(args.api, args).execute(f"kafka-latency-{args.api}")


if __name__ == "__main__":
    main()
