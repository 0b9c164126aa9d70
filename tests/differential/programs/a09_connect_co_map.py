"""connect() two streams of different types with a CoMapFunction."""

from pyflink.common import Types
from pyflink.datastream import CoMapFunction, StreamExecutionEnvironment


class Describe(CoMapFunction):
    def map1(self, value):
        return "int %d squared %d" % (value, value * value)

    def map2(self, value):
        return "str %s reversed %s" % (value, value[::-1])


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ints = env.from_collection([1, 2, 3], type_info=Types.INT())
strs = env.from_collection(["ab", "xyz"], type_info=Types.STRING())
ints.connect(strs).map(Describe(), Types.STRING()).print()
env.execute("a09_connect_co_map")
