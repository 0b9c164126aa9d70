"""Event-time session windows with a static gap; out-of-order records merge sessions."""

from pyflink.common import Duration, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.window import EventTimeSessionWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Session(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        items = [e[2] for e in elements]
        yield key, w.start, w.end, len(items), ",".join(sorted(items))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("u1", 1, "a"), ("u1", 3, "b"), ("u2", 2, "c"), ("u1", 20, "d"), ("u1", 12, "e"),
          ("u2", 40, "f"), ("u1", 7, "g"), ("u2", 44, "h"), ("u1", 50, "i")]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
    .with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(EventTimeSessionWindows.with_gap(Time.milliseconds(6)))
   .process(Session(), Types.TUPLE(
       [Types.STRING(), Types.LONG(), Types.LONG(), Types.INT(), Types.STRING()]))
   .print())
env.execute("w04_session_gap_process")
