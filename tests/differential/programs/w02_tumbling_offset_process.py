"""Tumbling event-time windows with an offset; ProcessWindowFunction reads context.window()."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        values = sorted(e[2] for e in elements)
        yield "key=%s window=[%d,%d) max_ts=%d values=%s watermark=%d" % (
            key, w.start, w.end, w.max_timestamp(), values, context.current_watermark())


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("k", 0, "a"), ("k", 2, "b"), ("k", 3, "c"), ("k", 7, "d"), ("k", 8, "e"),
          ("k", 13, "f"), ("k", -4, "g"), ("k", 100, "h")]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(5), Time.milliseconds(3)))
   .process(Describe(), Types.STRING())
   .print())
env.execute("w02_tumbling_offset_process")
