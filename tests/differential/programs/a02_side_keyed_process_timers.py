"""Side outputs from a KeyedProcessFunction, both from process_element and from on_timer."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedProcessFunction, OutputTag, StreamExecutionEnvironment
from pyflink.datastream.state import ValueStateDescriptor

alerts = OutputTag("alerts", Types.STRING())


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Watch(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count", Types.INT()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if value[2] > 50:
            yield alerts, "high %s=%d at %d" % (value[0], value[2], ctx.timestamp())
        ctx.timer_service().register_event_time_timer(value[1] + 10)
        yield value[0], n

    def on_timer(self, timestamp, ctx):
        yield alerts, "timer %s@%d count=%d" % (ctx.get_current_key(), timestamp,
                                               self.count.value())


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("a", 1, 10), ("b", 2, 70), ("a", 5, 90), ("a", 30, 20)]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
out = (ds.key_by(lambda e: e[0], key_type=Types.STRING())
         .process(Watch(), Types.TUPLE([Types.STRING(), Types.INT()])))
out.print("main")
out.get_side_output(alerts).print("alerts")
env.execute("a02_side_keyed_process_timers")
