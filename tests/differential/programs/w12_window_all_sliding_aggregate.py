"""window_all with sliding event-time windows and an AggregateFunction (sum, count)."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import AggregateFunction, StreamExecutionEnvironment
from pyflink.datastream.window import SlidingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[0]


class SumCount(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, acc):
        return acc[0] + value[1], acc[1] + 1

    def get_result(self, acc):
        return acc[0], acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(0, 1), (4, 2), (5, 3), (9, 4), (12, 5), (18, 6)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.window_all(SlidingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(4)))
   .aggregate(SumCount(), accumulator_type=Types.TUPLE([Types.INT(), Types.INT()]),
              output_type=Types.TUPLE([Types.INT(), Types.INT()]))
   .print())
env.execute("w12_window_all_sliding_aggregate")
