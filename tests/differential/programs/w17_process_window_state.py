"""ProcessWindowFunction with per-window and global state; a continuous trigger fires each
window several times, so both states are read across firings."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.datastream.window import ContinuousEventTimeTrigger, TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Firings(ProcessWindowFunction):
    def process(self, key, context, elements):
        per_window = context.window_state().get_state(
            ValueStateDescriptor("firings", Types.INT()))
        overall = context.global_state().get_state(
            ValueStateDescriptor("total", Types.INT()))
        n = (per_window.value() or 0) + 1
        per_window.update(n)
        total = (overall.value() or 0) + 1
        overall.update(total)
        w = context.window()
        yield "%s [%d,%d) firing=%d total=%d elements=%d" % (
            key, w.start, w.end, n, total, len(list(elements)))

    def clear(self, context):
        context.window_state().get_state(ValueStateDescriptor("firings", Types.INT())).clear()


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("k", 1), ("k", 5), ("k", 12), ("k", 27), ("k", 33)]
ds = env.from_collection(events, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(20)))
   .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(8)))
   .process(Firings(), Types.STRING())
   .print())
env.execute("w17_process_window_state")
