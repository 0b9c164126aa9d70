"""A tumbling event-time window with records in flight: a PyFlink program (issue 42's third
acceptance program).

    tumbling_window.py first <lines-file> <stdout-file> <records> <backend> <savepoint-dir>
        reads <lines-file> (``key,item,timestamp``) with a continuously monitored file
        source; once the first two ten-second windows of every key are printed (and a
        moment more, for the rest of the records to reach the window), it stops with a
        canonical savepoint: the third window's records are in flight, its timers pending.
    tumbling_window.py second <savepoint>
        resumes the windows from <savepoint> over SECOND_HALF (a bounded collection).

The window's uid is ``windows`` and it runs at parallelism 2; the rest runs at 1, so each
key's records arrive in order. Its contents are a list (a ProcessWindowFunction).
"""

import sys
import time

from pyflink.common import Configuration, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows

FIRST_HALF_WINDOWS = 10  # windows [0, 10000) and [10000, 20000), five keys each
SECOND_HALF = [
    ("alice", "kiwi", 29_500),
    ("bob", "lime", 31_000),
    ("carol", "fig", 33_000),
    ("alice", "pear", 35_000),
    ("frank", "plum", 36_000),
    ("erin", "apple", 41_000),
    ("bob", "pear", 42_000),
    ("alice", "fig", 44_000),
]


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        elements = list(elements)
        items = ",".join(f"{item}@{ts}" for _, item, ts in elements)
        window = context.window()
        yield f"{key} count={len(elements)} window=[{window.start},{window.end}) {items}"


def parse(line):
    key, item, ts = line.split(",")
    return key, item, int(ts)


def windowed(stream):
    """The part both halves share: timestamps, key, window, with uids."""
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
    return (
        stream.assign_timestamps_and_watermarks(watermarks)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .process(Describe(), Types.STRING())
        .set_parallelism(2)
        .uid("windows")
        .name("windows")
    )


def first(lines_file, stdout_file, records, backend, savepoint_dir):
    from pyflink.common import Duration
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), lines_file)
        .monitor_continuously(Duration.of_seconds(60))
        .build()
    )
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").uid("lines")
    parsed = lines.map(parse).uid("parse")
    windowed(parsed).print().uid("print")
    client = env.execute_async("tumbling window, first half")
    deadline = time.monotonic() + 240
    while True:
        with open(stdout_file) as f:
            fired = sum(1 for line in f if " count=" in line)
        if fired >= FIRST_HALF_WINDOWS:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"only {fired} of {FIRST_HALF_WINDOWS} windows printed")
        time.sleep(0.5)
    time.sleep(3)  # the last records reach the window (no output says when they have)
    from pyflink.java_gateway import get_gateway

    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    path = client._j_job_client.stopWithSavepoint(False, savepoint_dir, canonical).get()
    print(f"SAVEPOINT {path}", flush=True)


def second(savepoint):
    conf = Configuration()
    conf.set_string("execution.savepoint.path", savepoint)
    conf.set_string("execution.savepoint.ignore-unclaimed-state", "true")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    records = env.from_collection(SECOND_HALF)
    windowed(records).print()
    env.execute("tumbling window, second half")


if __name__ == "__main__":
    if sys.argv[1] == "first":
        first(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        second(*sys.argv[2:])
