"""forward() keeps every record on its subtask: map -> forward -> map at the same
parallelism see the same subtask index for each record. (PyFlink 2.3 has no global_().)"""

from pyflink.common import Types
from pyflink.datastream import MapFunction, StreamExecutionEnvironment


class WithIndex(MapFunction):
    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()

    def map(self, value):
        return (*value, self.index)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection([(i,) for i in range(8)],
                         type_info=Types.TUPLE([Types.INT()]))
(ds.rebalance().map(WithIndex()).set_parallelism(2)
   .forward().map(WithIndex()).set_parallelism(2)
   .map(lambda t: "%d same=%s" % (t[0], t[1] == t[2]), Types.STRING()).set_parallelism(2)
   .print().set_parallelism(1))
env.execute("a17_partition_forward")
