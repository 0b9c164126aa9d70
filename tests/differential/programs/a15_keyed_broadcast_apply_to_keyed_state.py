"""apply_to_keyed_state: a broadcast bonus is added to the counter of every key seen so far,
and keys first seen later start with the bonuses already broadcast, so the final counts do
not depend on how the two inputs interleave."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedBroadcastProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

bonuses = MapStateDescriptor("bonuses", Types.STRING(), Types.INT())
counter = ValueStateDescriptor("counter", Types.INT())


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Count(KeyedBroadcastProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(counter)

    def process_element(self, value, ctx):
        n = self.count.value()
        if n is None:
            n = sum(v for _, v in ctx.get_broadcast_state(bonuses).items())
        self.count.update(n + value[2])
        ctx.timer_service().register_event_time_timer(5000)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(bonuses).put(value[0], value[2])

        def add_bonus(key, state):
            state.update(state.value() + value[2])

        ctx.apply_to_keyed_state(counter, add_bonus)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), self.count.value()


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
typ = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
events = env.from_collection([("a", 1, 1), ("b", 2, 10), ("a", 3, 2), ("c", 4, 100)],
                             type_info=typ)
grants = env.from_collection([("spring", 0, 1000), ("summer", 0, 20000)], type_info=typ)
(events.assign_timestamps_and_watermarks(wm)
    .key_by(lambda e: e[0], key_type=Types.STRING())
    .connect(grants.assign_timestamps_and_watermarks(wm).broadcast(bonuses))
    .process(Count(), Types.TUPLE([Types.STRING(), Types.INT()]))
    .print())
env.execute("a15_keyed_broadcast_apply_to_keyed_state")
