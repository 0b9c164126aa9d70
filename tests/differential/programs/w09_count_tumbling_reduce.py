"""Keyed tumbling count windows of 3 with reduce; incomplete windows never fire."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(k, i) for i in range(1, 9) for k in ("p", "q") if (i + len(k)) % 3 or k == "p"]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .count_window(3)
   .reduce(lambda a, b: (a[0], a[1] * 10 + b[1]),
           output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
   .print())
env.execute("w09_count_tumbling_reduce")
