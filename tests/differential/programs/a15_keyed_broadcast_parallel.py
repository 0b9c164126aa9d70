"""KeyedBroadcastProcessFunction at parallelism 2: every subtask holds the same broadcast
state, keyed events go to the subtask of their (typed) key; totals are emitted at the end
of input, scaled by the broadcast factor for their key (or the default).

PyFlink 2.3's context has no apply_to_keyed_state, so keyed state is only touched from the
keyed side here."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedBroadcastProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

factors = MapStateDescriptor("factors", Types.STRING(), Types.INT())


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Scale(KeyedBroadcastProcessFunction):
    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total", Types.INT()))
        self.subtask = ctx.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        self.total.update((self.total.value() or 0) + value[2])
        ctx.timer_service().register_event_time_timer(1000 + value[2])

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(factors).put(value[0], value[2])

    def on_timer(self, timestamp, ctx):
        state = ctx.get_broadcast_state(factors)
        factor = state.get(ctx.get_current_key()) or state.get("default")
        keys = sorted(k for k, _ in state.items())
        yield "%s total=%d x%d = %d (timer %d, subtask %d sees %s)" % (
            ctx.get_current_key(), self.total.value(), factor, self.total.value() * factor,
            timestamp, self.subtask, keys)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
typ = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
events = env.from_collection([("a", 1, 1), ("b", 2, 10), ("a", 3, 2), ("c", 4, 100),
                              ("d", 5, 20), ("e", 6, 7)], type_info=typ)
updates = env.from_collection([("default", 0, 2), ("c", 0, 5)], type_info=typ)
(events.assign_timestamps_and_watermarks(wm)
    .key_by(lambda e: e[0], key_type=Types.STRING())
    .connect(updates.assign_timestamps_and_watermarks(wm).broadcast(factors))
    .process(Scale(), Types.STRING())
    .print())
env.execute("a15_keyed_broadcast_parallel")
