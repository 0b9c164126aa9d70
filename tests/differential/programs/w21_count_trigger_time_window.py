"""CountTrigger replacing the event-time trigger of tumbling windows: fires every 2 records,
and the window's end no longer fires it."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import CountTrigger, TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("z", 1, "a"), ("z", 2, "b"), ("z", 3, "c"), ("z", 4, "d"), ("z", 5, "e"),
          ("z", 12, "f"), ("z", 13, "g"), ("z", 25, "h")]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
   .trigger(CountTrigger.of(2))
   .reduce(lambda a, b: (a[0], b[1], a[2] + b[2]),
           output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.STRING()]))
   .print())
env.execute("w21_count_trigger_time_window")
