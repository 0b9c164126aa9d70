"""Kafka -> keyed counts -> Kafka: a PyFlink program (issue 42's fourth acceptance program).

    kafka_counts.py first <bootstrap> <in> <out> <stops> <stdout-file> <records> <backend>
            <savepoint-dir>
        reads topic <in> with a KafkaSource bounded at <stops> (``partition:offset,...``),
        counts per key, writes ``key count=N total=T`` to topic <out> (exactly once) and
        prints it; once <records> lines are in <stdout-file> (this process's standard
        output) it stops with a canonical savepoint: the source's split offsets lie in it.
    kafka_counts.py second <bootstrap> <in> <out> <stops> <savepoint>
        resumes from <savepoint> and reads on up to <stops>, then ends (the restored splits
        keep the stopping offsets of the first half): how sparkpoint runs it.
    kafka_counts.py second-until <bootstrap> <in> <out> <stops> <savepoint> <stdout-file>
            <records> <savepoint-dir>
        the same, stopped with a savepoint once <records> lines are printed: how PyFlink
        runs it for the recording (restored, its bounded KafkaSource read every record and
        then did not end: the job went on taking checkpoints).

The second half's sink has a new uid (``sink-resumed``): Flink's KafkaSink state (its
writer's transactional ids, its committer's committables of the savepoint) is left behind,
as the import into sparkpoint leaves it (docs/flink-migration.md). Restored with it, Flink
recommits those committables, which fails where the broker does not know the transactions'
producer ids any more (``InvalidPidMappingException``: seen with a new broker holding the
same input) and restarts the job without end; the first recording, with the old uid against
the same broker, did not end in 300 s either.

On PyFlink the environment variable ``FLINK_KAFKA_CONNECTOR_JAR`` names the
flink-sql-connector-kafka jar. The key is a LONG (``key_type=Types.LONG()``). The source's
uid is ``source``, the counter's ``counter``, the sink's ``sink``.
"""

import os
import sys
import time

from pyflink.common import Configuration, SimpleStringSchema, Types, WatermarkStrategy
from pyflink.datastream import (
    CheckpointingMode,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.base import DeliveryGuarantee
from pyflink.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaTopicPartition,
)
from pyflink.datastream.state import ValueStateDescriptor


class Counter(KeyedProcessFunction):
    """Per key: how many records and their total (both typed)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.INT()))

    def process_element(self, value, ctx):
        key, amount = value
        count = (self.count.value() or 0) + 1
        total = (self.total.value() or 0) + amount
        self.count.update(count)
        self.total.update(total)
        yield f"{key} count={count} total={total}"


def parse(line):
    key, amount = line.split(",")
    return int(key), int(amount)


def pipeline(env, bootstrap, topic_in, topic_out, stops, sink_uid):
    """The part both halves share, with uids."""
    stopping = {
        KafkaTopicPartition(topic_in, int(p)): int(o)
        for p, o in (item.split(":") for item in stops.split(","))
    }
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(topic_in)
        .set_group_id("flink-savepoint-counts")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.offsets(stopping))
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic_out)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("flink-savepoint-counts")
        .set_property("transaction.timeout.ms", "600000")
        .build()
    )
    counted = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
        .uid("source")
        .map(parse, output_type=Types.TUPLE([Types.LONG(), Types.INT()]))
        .uid("parse")
        .key_by(lambda r: r[0], key_type=Types.LONG())
        .process(Counter(), output_type=Types.STRING())
        .uid("counter")
        .name("counter")
    )
    counted.sink_to(sink).uid(sink_uid)
    return counted


def environment(savepoint=None, backend="hashmap"):
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    if savepoint is not None:
        conf.set_string("execution.savepoint.path", savepoint)
        conf.set_string("execution.savepoint.ignore-unclaimed-state", "true")  # the old sink
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    jar = os.environ.get("FLINK_KAFKA_CONNECTOR_JAR")  # set by the recorder for PyFlink
    if jar:
        env.add_jars(f"file://{jar}")
    env.set_parallelism(2)
    env.enable_checkpointing(1000, CheckpointingMode.EXACTLY_ONCE)
    return env


def first(bootstrap, topic_in, topic_out, stops, stdout_file, records, backend, savepoint_dir):
    env = environment(backend=backend)
    pipeline(env, bootstrap, topic_in, topic_out, stops, "sink").print().uid("print")
    stop_after(env.execute_async("kafka counts, first half"), stdout_file, records, savepoint_dir)


def stop_after(client, stdout_file, records, savepoint_dir):
    """Once <records> lines are printed, stop the job with a canonical savepoint (its
    transactions committed) and print where it is."""
    deadline = time.monotonic() + 240
    while True:
        with open(stdout_file) as f:
            done = sum(1 for line in f if " count=" in line)
        if done >= records:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"only {done} of {records} records printed")
        time.sleep(0.5)
    from pyflink.java_gateway import get_gateway

    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    path = client._j_job_client.stopWithSavepoint(False, savepoint_dir, canonical).get()
    print(f"SAVEPOINT {path}", flush=True)


def second_until(bootstrap, topic_in, topic_out, stops, savepoint, stdout_file, records, where):
    """The second half as PyFlink runs it for the recording: restored from a savepoint,
    PyFlink's KafkaSource does not end at the stopping offsets (the job went on taking
    checkpoints after reading every record), so it stops once <records> are printed."""
    env = environment(savepoint)
    pipeline(env, bootstrap, topic_in, topic_out, stops, "sink-resumed").print()
    stop_after(env.execute_async("kafka counts, second half"), stdout_file, records, where)


def second(bootstrap, topic_in, topic_out, stops, savepoint):
    env = environment(savepoint)
    pipeline(env, bootstrap, topic_in, topic_out, stops, "sink-resumed")
    env.execute("kafka counts, second half")


if __name__ == "__main__":
    if sys.argv[1] == "first":
        first(*sys.argv[2:7], int(sys.argv[7]), sys.argv[8], sys.argv[9])
    elif sys.argv[1] == "second-until":
        second_until(*sys.argv[2:8], int(sys.argv[8]), sys.argv[9])
    else:
        second(*sys.argv[2:])
