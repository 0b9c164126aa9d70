"""A ListState buffer flushed by event-time timers: a PyFlink program (issue 42's second
acceptance program).

    timer_buffer.py first <lines-file> <stdout-file> <records> <backend> <savepoint-dir>
        reads <lines-file> (``key,item,timestamp``) with a continuously monitored file
        source; once every record and the flushes of the first two ten-second buckets are
        printed, it stops with a canonical savepoint: the third bucket's records are still
        buffered and its timers pending.
    timer_buffer.py second <savepoint>
        resumes the buffer from <savepoint> over SECOND_HALF (a bounded collection).

Per key, each record is appended to a list and an event-time timer is set at the end of
its ten-second bucket; a firing timer emits (and drops) the buffered records older than
its time, so what a flush emits does not depend on when the watermark arrives. Each key
also sets one processing-time timer far in the future: it is pending in the savepoint and
never fires (Flink drops pending processing-time timers at the end of input). The
buffer's uid is ``buffer`` and it runs at parallelism 2; the rest runs at 1, so each key's
records arrive in order.
"""

import sys
import time

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedProcessFunction, StreamExecutionEnvironment, TimeDomain
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

BUCKET = 10_000
FAR = 4_102_444_800_000  # 2100-01-01: a processing-time timer that stays pending
FIRST_HALF_FLUSHES = 10  # buckets 0 and 1, five keys each
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


class Buffer(KeyedProcessFunction):
    """Per key: how many records (LONG), the buffered ``(timestamp, item)`` pairs (a list
    of pickled values), an event-time timer per bucket with records."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.LONG()))
        self.buffer = runtime_context.get_list_state(
            ListStateDescriptor("buffer", Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value, ctx):
        key, item, ts = value
        seen = (self.seen.value() or 0) + 1
        self.seen.update(seen)
        self.buffer.add((ts, item))
        ctx.timer_service().register_event_time_timer((ts // BUCKET + 1) * BUCKET)
        if seen == 1:
            ctx.timer_service().register_processing_time_timer(FAR)
        yield f"{key} count={seen} buffered {item}@{ts}"

    def on_timer(self, timestamp, ctx):
        key = ctx.get_current_key()
        if ctx.time_domain() == TimeDomain.PROCESSING_TIME:
            yield f"{key} count=0 processing-time timer {timestamp}"
            return
        entries = list(self.buffer.get())
        due = [e for e in entries if e[0] < timestamp]
        rest = [e for e in entries if e[0] >= timestamp]
        if rest:
            self.buffer.update(rest)
        else:
            self.buffer.clear()
        items = ",".join(f"{item}@{ts}" for ts, item in due)
        yield f"{key} count={len(due)} flush@{timestamp} {items}"


def parse(line):
    key, item, ts = line.split(",")
    return key, item, int(ts)


def buffered(stream):
    """The part both halves share: timestamps, key, buffer, with uids."""
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
    return (
        stream.assign_timestamps_and_watermarks(watermarks)
        .key_by(lambda r: r[0])
        .process(Buffer(), output_type=Types.STRING())
        .set_parallelism(2)
        .uid("buffer")
        .name("buffer")
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
    buffered(parsed).print().uid("print")
    client = env.execute_async("timer buffer, first half")
    deadline = time.monotonic() + 240
    while True:
        with open(stdout_file) as f:
            printed = [line for line in f if " count=" in line]
        got = sum(1 for line in printed if " buffered " in line)
        flushed = sum(1 for line in printed if " flush@" in line)
        if got >= records and flushed >= FIRST_HALF_FLUSHES:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"only {got} of {records} records, {flushed} flushes printed")
        time.sleep(0.5)
    time.sleep(1)
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
    buffered(records).print()
    env.execute("timer buffer, second half")


if __name__ == "__main__":
    if sys.argv[1] == "first":
        first(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        second(*sys.argv[2:])
