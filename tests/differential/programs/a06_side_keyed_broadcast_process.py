"""Side outputs from a KeyedBroadcastProcessFunction: events are held in keyed state until
the end of input (event-time timer), then judged against the broadcast thresholds."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import (
    KeyedBroadcastProcessFunction,
    OutputTag,
    StreamExecutionEnvironment,
)
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor

too_high = OutputTag("too-high", Types.STRING())
limits = MapStateDescriptor("limits", Types.STRING(), Types.INT())


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Judge(KeyedBroadcastProcessFunction):
    def open(self, ctx):
        self.held = ctx.get_list_state(ListStateDescriptor("held", Types.INT()))

    def process_element(self, value, ctx):
        self.held.add(value[2])
        ctx.timer_service().register_event_time_timer(10_000)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(limits).put(value[0], value[2])

    def on_timer(self, timestamp, ctx):
        limit = ctx.get_broadcast_state(limits).get(ctx.get_current_key())
        for v in self.held.get():
            if limit is not None and v > limit:
                yield too_high, "%s %d > %d" % (ctx.get_current_key(), v, limit)
            else:
                yield "%s %d ok" % (ctx.get_current_key(), v)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
typ = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
events = env.from_collection([("cpu", 1, 40), ("mem", 2, 90), ("cpu", 3, 95), ("disk", 4, 99)],
                             type_info=typ).assign_timestamps_and_watermarks(wm)
rules = env.from_collection([("cpu", 0, 80), ("mem", 0, 50)],
                            type_info=typ).assign_timestamps_and_watermarks(wm)
out = (events.key_by(lambda e: e[0], key_type=Types.STRING())
       .connect(rules.broadcast(limits))
       .process(Judge(), Types.STRING()))
out.print("ok")
out.get_side_output(too_high).print("too-high")
env.execute("a06_side_keyed_broadcast_process")
