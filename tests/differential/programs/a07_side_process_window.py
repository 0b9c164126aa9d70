"""Side outputs from a ProcessWindowFunction: small windows are diverted."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import OutputTag, ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows

small = OutputTag("small", Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()]))


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Sizes(ProcessWindowFunction):
    def process(self, key, context, elements):
        n = len(list(elements))
        if n < 2:
            yield small, (key, context.window().start, n)
        else:
            yield "%s [%d,%d) n=%d" % (key, context.window().start, context.window().end, n)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("a", 1), ("a", 3), ("b", 4), ("a", 12), ("b", 14), ("b", 15)]
ds = env.from_collection(events, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
out = (ds.key_by(lambda e: e[0], key_type=Types.STRING())
         .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
         .process(Sizes(), Types.STRING()))
out.print("windows")
out.get_side_output(small).print("small")
env.execute("a07_side_process_window")
