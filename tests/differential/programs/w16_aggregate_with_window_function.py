"""Incremental aggregate combined with a WindowFunction (apply-style) on sliding windows."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import AggregateFunction, StreamExecutionEnvironment, WindowFunction
from pyflink.datastream.window import SlidingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


class Label(WindowFunction):
    def apply(self, key, window, inputs):
        for count in inputs:
            yield "%s [%d,%d) count=%d" % (key, window.start, window.end, count)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("r", 1), ("r", 2), ("r", 6), ("r", 9), ("r", 13), ("s", 7)]
ds = env.from_collection(events, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(SlidingEventTimeWindows.of(Time.milliseconds(8), Time.milliseconds(4)))
   .aggregate(Count(), window_function=Label(), accumulator_type=Types.INT(),
              output_type=Types.STRING())
   .print())
env.execute("w16_aggregate_with_window_function")
