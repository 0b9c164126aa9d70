"""PurgingTrigger(EventTimeTrigger) and a user-chosen EventTimeTrigger on sliding windows."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import (
    EventTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("p", 1, 1), ("p", 3, 2), ("p", 7, 4), ("p", 12, 8)]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
keyed = ds.key_by(lambda e: e[0], key_type=Types.STRING())
out = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
(keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(5)))
   .trigger(PurgingTrigger.of(EventTimeTrigger.create()))
   .reduce(lambda a, b: (a[0], b[1], a[2] + b[2]), output_type=out)
   .print("purging"))
(keyed.window(SlidingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(5)))
   .trigger(EventTimeTrigger.create())
   .reduce(lambda a, b: (a[0], b[1], a[2] + b[2]), output_type=out)
   .print("event-time"))
env.execute("w20_purging_event_time_trigger")
