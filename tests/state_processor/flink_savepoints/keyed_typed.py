"""Thread-mode state under an INT key, and TTL'd state: a PyFlink program for issue 42's
import (keyed_lists.py with ``key_by(..., key_type=Types.INT())``, plus a ValueState with a
StateTtlConfig of 100 years: the recorded output must stay valid), recorded in process and
thread mode.

    keyed_typed.py first <lines-file> <stdout-file> <records> <backend>[+thread] <savepoint-dir>
        as keyed_lists.py, in PyFlink's thread mode with ``+thread``.
    keyed_typed.py second <savepoint> [thread]
        resumes the counter from <savepoint> over SECOND_HALF (a bounded collection).

The key is ``sum(map(ord, name))``; the counter's uid is ``counter``.
"""

import sys
import time

from pyflink.common import Configuration, Time, Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction
from pyflink.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)

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


class Mean(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, accumulator):
        return accumulator[0] + value, accumulator[1] + 1

    def get_result(self, accumulator):
        return round(accumulator[0] / accumulator[1], 3)

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class Counter(KeyedProcessFunction):
    """Per key: the items seen (a list of STRING), the sum of amounts (reducing, LONG) and
    their mean (aggregating, the accumulator pickled)."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.STRING()))
        self.sum = runtime_context.get_reducing_state(
            ReducingStateDescriptor("sum", lambda a, b: a + b, Types.LONG())
        )
        self.mean = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("mean", Mean(), Types.PICKLED_BYTE_ARRAY())
        )

        last = ValueStateDescriptor("last", Types.LONG())
        last.enable_time_to_live(StateTtlConfig.new_builder(Time.days(36500)).build())
        self.last = runtime_context.get_state(last)

    def process_element(self, value, ctx):
        key, item, amount = value
        previous = self.last.value()
        self.last.update(amount)
        self.seen.add(item)
        self.sum.add(amount)
        self.mean.add(amount)
        seen = ",".join(self.seen.get())
        yield (
            f"{key} count=sum={self.sum.get()} mean={self.mean.get()} seen={seen} "
            f"previous={previous}"
        )


def parse(line):
    key, item, amount = line.split(",")
    return sum(map(ord, key)), item, int(amount)


def counted(stream):
    """The part both halves share: key, count, with uids."""
    return (
        stream.key_by(lambda r: r[0], key_type=Types.INT())
        .process(Counter(), output_type=Types.STRING())
        .uid("counter")
        .name("counter")
    )


def first(lines_file, stdout_file, records, backend, savepoint_dir):
    from pyflink.common import Duration
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

    conf = Configuration()
    backend, _, mode = backend.partition("+")  # "hashmap+thread": PyFlink's thread mode
    conf.set_string("state.backend.type", backend)
    if mode == "thread":
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
        parse, output_type=Types.TUPLE([Types.INT(), Types.STRING(), Types.INT()])
    ).uid("parse")
    counted(parsed).print().uid("print")
    client = env.execute_async("keyed typed, first half")
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
        [(sum(map(ord, k)), item, n) for k, item, n in SECOND_HALF],
        type_info=Types.TUPLE([Types.INT(), Types.STRING(), Types.INT()]),
    )
    counted(records).print()
    env.execute("keyed typed, second half")


if __name__ == "__main__":
    if sys.argv[1] == "first":
        first(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        second(*sys.argv[2:])
