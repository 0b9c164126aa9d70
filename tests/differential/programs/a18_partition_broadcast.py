"""broadcast() partitioning: every record reaches every one of 3 downstream subtasks."""

from pyflink.common import Types
from pyflink.datastream import MapFunction, StreamExecutionEnvironment


class WithIndex(MapFunction):
    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()

    def map(self, value):
        return "%s on %d" % (value, self.index)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
(env.from_collection(["a", "b"], type_info=Types.STRING())
    .broadcast()
    .map(WithIndex(), Types.STRING()).set_parallelism(3)
    .print().set_parallelism(1))
env.execute("a18_partition_broadcast")
