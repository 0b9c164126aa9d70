"""A user Trigger with its own state: fires (and purges) on a marker record, counts records in
partitioned state, and fires once more at the window's end."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.datastream.window import Trigger, TriggerResult, TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class MarkerTrigger(Trigger):
    def __init__(self):
        self.seen = ValueStateDescriptor("seen", Types.INT())

    def on_element(self, element, timestamp, window, ctx):
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.seen)
        state.update((state.value() or 0) + 1)
        if element[2] == "!":
            return TriggerResult.FIRE_AND_PURGE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_merge(self, window, ctx):
        pass

    def clear(self, window, ctx):
        ctx.delete_event_time_timer(window.max_timestamp())
        ctx.get_partitioned_state(self.seen).clear()


class Show(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield "%s [%d,%d) %s" % (key, context.window().start, context.window().end,
                                 "".join(e[2] for e in elements))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("t", 1, "a"), ("t", 2, "b"), ("t", 3, "!"), ("t", 4, "c"), ("t", 5, "d"),
          ("t", 11, "e"), ("t", 12, "!"), ("t", 21, "f")]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
   .trigger(MarkerTrigger())
   .process(Show(), Types.STRING())
   .print())
env.execute("w22_user_trigger")
