"""window_all with a tumbling count assigner (PyFlink has no count_window_all) and reduce."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import CountTumblingWindowAssigner

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(list(range(1, 12)), type_info=Types.INT())
(ds.window_all(CountTumblingWindowAssigner.of(4))
   .reduce(lambda a, b: a + b, output_type=Types.INT())
   .print())
env.execute("w13_window_all_count_reduce")
