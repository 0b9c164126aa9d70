"""KeyedCoProcessFunction with value, list and map state and event-time timers registered
from both inputs; connect().key_by() with one key selector per input."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedCoProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Enrich(KeyedCoProcessFunction):
    def open(self, ctx):
        self.name = ctx.get_state(ValueStateDescriptor("name", Types.STRING()))
        self.clicks = ctx.get_list_state(ListStateDescriptor("clicks", Types.STRING()))
        self.timers = ctx.get_map_state(MapStateDescriptor("timers", Types.LONG(), Types.STRING()))

    def process_element1(self, value, ctx):
        self.name.update(value[2])
        t = value[1] + 100
        self.timers.put(t, "profile")
        ctx.timer_service().register_event_time_timer(t)

    def process_element2(self, value, ctx):
        self.clicks.add(value[2])
        t = value[1] + 50
        self.timers.put(t, "click")
        ctx.timer_service().register_event_time_timer(t)

    def on_timer(self, timestamp, ctx):
        yield "%s@%d from %s: name=%s clicks=%s" % (
            ctx.get_current_key(), timestamp, self.timers.get(timestamp), self.name.value(),
            sorted(self.clicks.get()))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
typ = Types.TUPLE([Types.INT(), Types.LONG(), Types.STRING()])
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
profiles = env.from_collection([(1, 10, "ann"), (2, 20, "bob")], type_info=typ)
clicks = env.from_collection([(1, 11, "home"), (1, 13, "cart"), (2, 27, "home"), (3, 30, "faq")],
                             type_info=typ)
(profiles.assign_timestamps_and_watermarks(wm)
    .connect(clicks.assign_timestamps_and_watermarks(wm))
    .key_by(lambda p: p[0], lambda c: c[0], key_type=Types.INT())
    .process(Enrich(), Types.STRING())
    .print())
env.execute("a12_connect_keyed_co_process_state_timers")
