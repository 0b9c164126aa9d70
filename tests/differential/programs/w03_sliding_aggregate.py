"""Keyed sliding event-time windows (size 10, slide 5) with an AggregateFunction (average)."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import AggregateFunction, StreamExecutionEnvironment
from pyflink.datastream.window import SlidingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Average(AggregateFunction):
    def create_accumulator(self):
        return None, 0, 0

    def add(self, value, accumulator):
        return value[0], accumulator[1] + value[2], accumulator[2] + 1

    def get_result(self, accumulator):
        return accumulator[0], accumulator[1] / accumulator[2], accumulator[2]

    def merge(self, a, b):
        return a[0] or b[0], a[1] + b[1], a[2] + b[2]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("x", 1, 10), ("x", 3, 20), ("x", 6, 30), ("x", 11, 40), ("x", 14, 50),
          ("x", 22, 60), ("y", 4, 5), ("y", 16, 7)]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(SlidingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(5)))
   .aggregate(Average(),
              accumulator_type=Types.PICKLED_BYTE_ARRAY(),
              output_type=Types.TUPLE([Types.STRING(), Types.DOUBLE(), Types.INT()]))
   .print())
env.execute("w03_sliding_aggregate")
