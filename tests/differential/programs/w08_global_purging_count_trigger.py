"""Global windows with PurgingTrigger(CountTrigger(2)): each firing starts an empty window."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import CountTrigger, GlobalWindows, PurgingTrigger

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 1), ("a", 2), ("b", 5), ("a", 3), ("b", 6), ("a", 4), ("a", 5), ("b", 7)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(GlobalWindows.create())
   .trigger(PurgingTrigger.of(CountTrigger.of(2)))
   .reduce(lambda a, b: (a[0], a[1] + b[1]),
           output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
   .print())
env.execute("w08_global_purging_count_trigger")
