"""window_all over event-time session windows, ProcessAllWindowFunction with global state."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessAllWindowFunction
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.datastream.window import EventTimeSessionWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[0]


class Numbered(ProcessAllWindowFunction):
    def process(self, context, elements):
        counter = context.global_state().get_state(ValueStateDescriptor("n", Types.INT()))
        n = (counter.value() or 0) + 1
        counter.update(n)
        w = context.window()
        yield "session %d [%d,%d) %s" % (n, w.start, w.end, "".join(e[1] for e in elements))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(1, "a"), (4, "b"), (30, "c"), (9, "d"), (33, "e"), (60, "f")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.window_all(EventTimeSessionWindows.with_gap(Time.milliseconds(6)))
   .process(Numbered(), Types.STRING())
   .print())
env.execute("w25_session_window_all_process")
