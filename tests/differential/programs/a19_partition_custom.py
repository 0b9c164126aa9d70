"""partition_custom with a Partitioner class and with a lambda: the subtask is the user's."""

from pyflink.common import Types
from pyflink.datastream import MapFunction, StreamExecutionEnvironment
from pyflink.datastream.functions import Partitioner


class ByLength(Partitioner):
    def partition(self, key, num_partitions):
        return len(key) % num_partitions


class WithIndex(MapFunction):
    def __init__(self, label):
        self.label = label

    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()

    def map(self, value):
        return "%s %s -> %d" % (self.label, value, self.index)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
words = env.from_collection(["a", "bb", "ccc", "dddd", "ee"], type_info=Types.STRING())
(words.partition_custom(ByLength(), lambda w: w)
      .map(WithIndex("class"), Types.STRING()).set_parallelism(3)
      .print().set_parallelism(1))
nums = env.from_collection([10, 11, 12, 13], type_info=Types.INT())
(nums.partition_custom(lambda key, n: (key // 2) % n, lambda v: v)
     .map(WithIndex("lambda"), Types.STRING()).set_parallelism(2)
     .print().set_parallelism(1))
env.execute("a19_partition_custom")
