"""Keyed tumbling event-time windows (10 ms) with reduce; typed tuple output."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("a", 1, 1), ("b", 2, 10), ("a", 4, 2), ("a", 12, 3), ("b", 9, 20),
          ("a", 19, 4), ("b", 25, 30), ("a", 31, 5), ("a", 30, 6)]
ds = env.from_collection(
    events, type_info=Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
   .reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2] + b[2]),
           output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()]))
   .print())
env.execute("w01_tumbling_reduce")
