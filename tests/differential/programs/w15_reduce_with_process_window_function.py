"""Incremental reduce combined with a ProcessWindowFunction that sees the one reduced value."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class WithWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        values = list(elements)
        yield key, context.window().end, len(values), values[0][2]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("m", 1, 5), ("m", 2, 9), ("m", 8, 1), ("m", 11, 4), ("n", 3, 2), ("m", 19, 6)]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
   .reduce(lambda a, b: a if a[2] >= b[2] else b, window_function=WithWindow(),
           output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT(), Types.INT()]))
   .print())
env.execute("w15_reduce_with_process_window_function")
