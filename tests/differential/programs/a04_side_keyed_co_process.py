"""Side outputs from a KeyedCoProcessFunction: unmatched records go to a side output at the
end of input (event-time timer), matched pairs to the main output."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedCoProcessFunction, OutputTag, StreamExecutionEnvironment
from pyflink.datastream.state import ValueStateDescriptor

unmatched = OutputTag("unmatched", Types.STRING())


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Match(KeyedCoProcessFunction):
    def open(self, ctx):
        self.order = ctx.get_state(ValueStateDescriptor("order", Types.STRING()))
        self.payment = ctx.get_state(ValueStateDescriptor("payment", Types.INT()))

    def process_element1(self, value, ctx):
        self.order.update(value[2])
        ctx.timer_service().register_event_time_timer(1000)

    def process_element2(self, value, ctx):
        self.payment.update((self.payment.value() or 0) + value[2])
        ctx.timer_service().register_event_time_timer(1000)

    def on_timer(self, timestamp, ctx):
        order, paid = self.order.value(), self.payment.value()
        if order is not None and paid is not None:
            yield "%s %s paid %d" % (ctx.get_current_key(), order, paid)
        else:
            yield unmatched, "%s order=%s paid=%s" % (ctx.get_current_key(), order, paid)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField())
orders = env.from_collection([("o1", 1, "book"), ("o2", 2, "pen"), ("o3", 3, "ink")],
                             type_info=Types.TUPLE([Types.STRING(), Types.LONG(), Types.STRING()]))
payments = env.from_collection([("o1", 4, 10), ("o3", 5, 2), ("o1", 6, 5), ("o9", 7, 1)],
                               type_info=Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()]))
out = (orders.assign_timestamps_and_watermarks(wm)
       .connect(payments.assign_timestamps_and_watermarks(wm))
       .key_by(lambda o: o[0], lambda p: p[0], key_type=Types.STRING())
       .process(Match(), Types.STRING()))
out.print("matched")
out.get_side_output(unmatched).print("unmatched")
env.execute("a04_side_keyed_co_process")
