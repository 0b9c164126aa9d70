"""window_all with bounded out-of-orderness, allowed lateness and a late-data tag."""

from pyflink.common import Duration, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessAllWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value


class Span(ProcessAllWindowFunction):
    def process(self, context, elements):
        values = sorted(elements)
        yield "[%d,%d) %s" % (context.window().start, context.window().end, values)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
late = OutputTag("late-all", Types.LONG())
ds = env.from_collection([30, 10, 50, 20, 5, 44, 0, 61], type_info=Types.LONG())
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10))
    .with_timestamp_assigner(ByField()))
result = (ds.window_all(TumblingEventTimeWindows.of(Time.milliseconds(20)))
            .allowed_lateness(5)
            .side_output_late_data(late)
            .process(Span(), Types.STRING()))
result.print()
result.get_side_output(late).map(lambda v: "late %d" % v, Types.STRING()).print()
env.execute("w24_window_all_lateness_out_of_order")
