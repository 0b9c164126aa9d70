"""A non-keyed CoProcessFunction with typed output; each input tagged by side."""

from pyflink.common import Row, Types
from pyflink.datastream import CoProcessFunction, StreamExecutionEnvironment


class Merge(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield Row(side="left", value=value * 2)

    def process_element2(self, value, ctx):
        yield Row(side="right", value=len(value))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
left = env.from_collection([5, 6], type_info=Types.INT())
right = env.from_collection(["abc", "de", "f"], type_info=Types.STRING())
(left.connect(right)
     .process(Merge(), Types.ROW_NAMED(["side", "value"], [Types.STRING(), Types.INT()]))
     .print())
env.execute("a11_connect_co_process")
