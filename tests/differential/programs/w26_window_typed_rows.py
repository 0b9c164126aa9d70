"""Windows over Types.ROW_NAMED records: key and reduce use field names; typed Row output."""

from pyflink.common import Row, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value.ts


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
row = Types.ROW_NAMED(["sensor", "ts", "reading"], [Types.STRING(), Types.LONG(), Types.DOUBLE()])
data = [Row("s1", 1, 0.5), Row("s2", 2, 1.25), Row("s1", 4, 2.0), Row("s1", 12, 3.5)]
ds = env.from_collection(data, type_info=row)
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
(ds.key_by(lambda r: r.sensor, key_type=Types.STRING())
   .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
   .reduce(lambda a, b: Row(sensor=a.sensor, ts=max(a.ts, b.ts),
                            reading=a.reading + b.reading), output_type=row)
   .print())
env.execute("w26_window_typed_rows")
