"""apply() with a WindowFunction on keyed tumbling event-time windows (tuple keys)."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment, WindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class Total(WindowFunction):
    def apply(self, key, window, inputs):
        yield "%s/%s@%d: %d" % (key[0], key[1], window.start, sum(i[3] for i in inputs))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("eu", "x", 1, 10), ("eu", "y", 2, 1), ("eu", "x", 4, 5), ("us", "x", 6, 7),
          ("eu", "x", 16, 3), ("us", "x", 18, 2)]
ds = env.from_collection(events)
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: (e[0], e[1]))
   .window(TumblingEventTimeWindows.of(Time.milliseconds(15)))
   .apply(Total(), Types.STRING())
   .print())
env.execute("w18_apply_window_function")
