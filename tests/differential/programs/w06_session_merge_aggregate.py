"""Session windows with an AggregateFunction: merging sessions merges accumulators."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import AggregateFunction, StreamExecutionEnvironment
from pyflink.datastream.window import EventTimeSessionWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class MinMaxCount(AggregateFunction):
    def create_accumulator(self):
        return [None, None, 0]

    def add(self, value, acc):
        lo = value[2] if acc[0] is None else min(acc[0], value[2])
        hi = value[2] if acc[1] is None else max(acc[1], value[2])
        return [lo, hi, acc[2] + 1]

    def get_result(self, acc):
        return "min=%s max=%s count=%d" % (acc[0], acc[1], acc[2])

    def merge(self, a, b):
        return [min(x for x in (a[0], b[0]) if x is not None),
                max(x for x in (a[1], b[1]) if x is not None), a[2] + b[2]]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
# 1 and 9 start two sessions (gap 5); 5 arrives later and bridges them into one.
events = [("k", 1, 7), ("k", 9, 3), ("k", 30, 1), ("k", 5, 11), ("k", 33, 2), ("j", 2, 4)]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
keyed = ds.key_by(lambda e: e[0], key_type=Types.STRING())
(keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(5)))
   .aggregate(MinMaxCount(), output_type=Types.STRING())
   .print("aggregate"))
# The same sessions through reduce, for comparison.
(keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(5)))
   .reduce(lambda a, b: (a[0], min(a[1], b[1]), a[2] + b[2]))
   .print("reduce"))
env.execute("w06_session_merge_aggregate")
