"""allowed_lateness with side_output_late_data on keyed tumbling windows, input far out of order.

With a bounded collection the only watermark PyFlink emits reliably is the final one, so no
record is late here: the late-data side output is empty (see NOTES.md)."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
row = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
# A fresh type for the tag: PyFlink cannot pickle a type already handed to Java.
late = OutputTag("late", Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()]))
events = [("a", 100, 1), ("a", 5000, 2), ("a", 120, 4), ("b", 3, 8), ("a", 9000, 16),
          ("a", 1, 32)]
ds = env.from_collection(events, type_info=row)
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
windowed = (ds.key_by(lambda e: e[0], key_type=Types.STRING())
              .window(TumblingEventTimeWindows.of(Time.milliseconds(1000)))
              .allowed_lateness(500)
              .side_output_late_data(late)
              .reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2] + b[2]), output_type=row))
windowed.print("on-time")
windowed.get_side_output(late).print("late")
env.execute("w23_allowed_lateness_side_output")
