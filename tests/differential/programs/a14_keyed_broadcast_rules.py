"""KeyedBroadcastProcessFunction: rules broadcast to keyed events; events are evaluated at the
end of input (event-time timer) against the read-only broadcast state, keyed state kept."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedBroadcastProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor

rules = MapStateDescriptor("rules", Types.STRING(), Types.STRING())


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Apply(KeyedBroadcastProcessFunction):
    def open(self, ctx):
        self.events = ctx.get_list_state(ListStateDescriptor("events", Types.STRING()))

    def process_element(self, value, ctx):
        self.events.add(value[2])
        ctx.timer_service().register_event_time_timer(value[1] + 1000)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(rules).put(value[0], value[2])

    def on_timer(self, timestamp, ctx):
        state = ctx.get_broadcast_state(rules)
        action = state.get(ctx.get_current_key()) or state.get("*") or "keep"
        events = list(self.events.get())
        yield "%s@%d %s %s" % (ctx.get_current_key(), timestamp, action, events)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
typ = Types.TUPLE([Types.STRING(), Types.LONG(), Types.STRING()])
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
events = env.from_collection([("u1", 1, "login"), ("u2", 2, "buy"), ("u1", 3, "logout"),
                              ("u3", 4, "spam")], type_info=typ)
updates = env.from_collection([("u3", 0, "block"), ("*", 0, "audit")], type_info=typ)
(events.assign_timestamps_and_watermarks(wm)
    .key_by(lambda e: e[0], key_type=Types.STRING())
    .connect(updates.assign_timestamps_and_watermarks(wm).broadcast(rules))
    .process(Apply(), Types.STRING())
    .print())
env.execute("a14_keyed_broadcast_rules")
