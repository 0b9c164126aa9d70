"""ContinuousEventTimeTrigger on a tumbling window with reduce: early firings every 10 ms."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import ContinuousEventTimeTrigger, TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("c", 2, 1), ("c", 14, 2), ("c", 25, 4), ("c", 41, 8), ("c", 58, 16)]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(50)))
   .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(10)))
   .reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2] + b[2]),
           output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()]))
   .print())
env.execute("w19_continuous_event_time_trigger")
