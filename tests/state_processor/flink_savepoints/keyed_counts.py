"""Keyed counts with Value and Map state: a PyFlink program (issue 42's first acceptance program).

    keyed_counts.py first <lines-file> <stdout-file> <records> <backend>[+snappy] <savepoint-dir>
        reads <lines-file> (``key,item,amount``) with a continuously monitored file source,
        so the job stays up after the last line; once <records> lines are in <stdout-file>
        (this process's own standard output) it stops with a canonical savepoint.
    keyed_counts.py second <savepoint> [thread]
        resumes the counter from <savepoint> over SECOND_HALF (a bounded collection).

The counter's uid is ``counter``; the second half's source is new (its uid is not in the
savepoint), so the first half's file-source state is left unclaimed.
"""

import sys
import time

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

SECOND_HALF = [
    ("alice", "pear", 3),
    ("bob", "apple", 1),
    ("carol", "fig", 2),
    ("alice", "apple", 5),
    ("dave", "kiwi", 4),
    ("erin", "plum", 1),
    ("bob", "plum", 2),
    ("carol", "fig", 7),
    ("frank", "lime", 9),
    ("alice", "pear", 1),
]


class Counter(KeyedProcessFunction):
    """Per key: how many records (typed LONG), the running total (untyped: pickled), and
    how many of each item (a typed map)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.total = runtime_context.get_state(
            ValueStateDescriptor("total", Types.PICKLED_BYTE_ARRAY())
        )
        self.items = runtime_context.get_map_state(
            MapStateDescriptor("items", Types.STRING(), Types.LONG())
        )

    def process_element(self, value, ctx):
        key, item, amount = value
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        total = self.total.value() or (0, [])
        total = (total[0] + amount, (total[1] + [amount])[-3:])
        self.total.update(total)
        self.items.put(item, (self.items.get(item) or 0) + 1)
        items = ",".join(f"{k}={v}" for k, v in sorted(self.items.items()))
        yield f"{key} count={count} total={total[0]} last={total[1]} items={items}"


def parse(line):
    key, item, amount = line.split(",")
    return key, item, int(amount)


def counted(stream):
    """The part both halves share: key, count, with uids."""
    return (
        stream.key_by(lambda r: r[0])
        .process(Counter(), output_type=Types.STRING())
        .uid("counter")
        .name("counter")
    )


def first(lines_file, stdout_file, records, backend, savepoint_dir):
    from pyflink.common import Duration
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

    conf = Configuration()
    # "hashmap+snappy": compressed key groups; "hashmap+thread": PyFlink's thread mode
    backend, _, variant = backend.partition("+")
    conf.set_string("state.backend.type", backend)
    if variant == "snappy":
        conf.set_string("execution.checkpointing.snapshot-compression", "true")
    if variant == "thread":
        conf.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), lines_file)
        .monitor_continuously(Duration.of_seconds(60))
        .build()
    )
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").uid("lines")
    parsed = lines.map(
        parse, output_type=Types.TUPLE([Types.STRING(), Types.STRING(), Types.INT()])
    ).uid("parse")
    counted(parsed).print().uid("print")
    client = env.execute_async("keyed counts, first half")
    deadline = time.monotonic() + 240
    while True:
        with open(stdout_file) as f:
            done = sum(1 for line in f if " count=" in line)
        if done >= records:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"only {done} of {records} records printed")
        time.sleep(0.5)
    # PyFlink's JobClient.stop_with_savepoint passes two arguments; Flink 2's Java method
    # takes the format too, so it is called on the Java client with CANONICAL spelled out.
    from pyflink.java_gateway import get_gateway

    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    path = client._j_job_client.stopWithSavepoint(False, savepoint_dir, canonical).get()
    print(f"SAVEPOINT {path}", flush=True)


def second(savepoint, mode="process"):
    conf = Configuration()
    if mode != "process":  # process is the default
        conf.set_string("python.execution-mode", mode)
    conf.set_string("execution.savepoint.path", savepoint)
    conf.set_string("execution.savepoint.ignore-unclaimed-state", "true")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    records = env.from_collection(
        SECOND_HALF, type_info=Types.TUPLE([Types.STRING(), Types.STRING(), Types.INT()])
    )
    counted(records).print()
    env.execute("keyed counts, second half")


if __name__ == "__main__":
    if sys.argv[1] == "first":
        first(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        second(*sys.argv[2:])
