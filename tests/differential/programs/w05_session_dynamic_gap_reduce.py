"""Event-time session windows whose gap comes from each record; reduce concatenates."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import EventTimeSessionWindows, SessionWindowTimeGapExtractor


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class GapFromRecord(SessionWindowTimeGapExtractor):
    def extract(self, element):
        return element[2]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = [("s", 0, 3, "a"), ("s", 2, 10, "b"), ("s", 11, 2, "c"), ("s", 14, 1, "d"),
          ("s", 16, 20, "e"), ("s", 40, 5, "f"), ("t", 5, 1, "g"), ("t", 6, 1, "h")]
ds = env.from_collection(events, type_info=Types.TUPLE(
    [Types.STRING(), Types.LONG(), Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(EventTimeSessionWindows.with_dynamic_gap(GapFromRecord()))
   .reduce(lambda a, b: (a[0], min(a[1], b[1]), max(a[2], b[2]), a[3] + b[3]))
   .print())
env.execute("w05_session_dynamic_gap_reduce")
