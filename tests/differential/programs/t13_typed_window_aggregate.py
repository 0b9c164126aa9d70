"""A window aggregate whose accumulator is declared Types.FLOAT and whose output is a
ROW_NAMED: the accumulator rounds as a Java float between records."""

from pyflink.common import Row, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import AggregateFunction, StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class FloatSum(AggregateFunction):
    def create_accumulator(self):
        return 0.0

    def add(self, value, acc):
        return acc + value[2]

    def get_result(self, acc):
        return Row(total=acc, exact=repr(acc))

    def merge(self, a, b):
        return a + b


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("f", 1, 0.1), ("f", 2, 0.2), ("f", 3, 110.1), ("f", 14, 1e-05)]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.DOUBLE()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
   .aggregate(FloatSum(), accumulator_type=Types.FLOAT(),
              output_type=Types.ROW_NAMED(["total", "exact"], [Types.DOUBLE(), Types.STRING()]))
   .print())
env.execute("t13_typed_window_aggregate")
