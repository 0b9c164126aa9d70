"""global_() sends every record to subtask 0; forward() keeps records on their subtask
(map -> forward -> map at the same parallelism report the same index)."""

from pyflink.common import Types
from pyflink.datastream import MapFunction, StreamExecutionEnvironment


class WithIndex(MapFunction):
    def __init__(self, label):
        self.label = label

    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()

    def map(self, value):
        if isinstance(value, tuple):
            return value[0], value[1], "%s=%d" % (self.label, self.index)
        return value, "%s=%d" % (self.label, self.index)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection(list(range(6)), type_info=Types.INT())
(ds.global_().map(WithIndex("global")).set_parallelism(3)
   .map(lambda t: "%d %s" % t, Types.STRING()).set_parallelism(1)
   .print().set_parallelism(1))
(ds.rebalance().map(WithIndex("first")).set_parallelism(2)
   .forward().map(WithIndex("second")).set_parallelism(2)
   .map(lambda t: "%d %s %s same=%s" % (t[0], t[1], t[2], t[1][-1] == t[2][-1]), Types.STRING())
   .set_parallelism(2)
   .map(lambda s: s.split(" ", 1)[0] + " same=" + s.rsplit("=", 1)[1], Types.STRING())
   .set_parallelism(1)
   .print().set_parallelism(1))
env.execute("a17_partition_global_forward")
