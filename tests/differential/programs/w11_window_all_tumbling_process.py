"""window_all with tumbling event-time windows and a ProcessAllWindowFunction."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessAllWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[0]


class Summary(ProcessAllWindowFunction):
    def process(self, context, elements):
        w = context.window()
        names = sorted(e[1] for e in elements)
        yield "[%d,%d) %d %s" % (w.start, w.end, len(names), " ".join(names))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(3, "c"), (1, "a"), (14, "n"), (7, "g"), (25, "y"), (21, "u"), (11, "k")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.window_all(TumblingEventTimeWindows.of(Time.milliseconds(10)))
   .process(Summary(), Types.STRING())
   .print())
env.execute("w11_window_all_tumbling_process")
