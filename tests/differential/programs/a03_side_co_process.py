"""Side outputs from a CoProcessFunction on connected streams."""

from pyflink.common import Types
from pyflink.datastream import CoProcessFunction, OutputTag, StreamExecutionEnvironment

rejected = OutputTag("rejected", Types.STRING())


class Check(CoProcessFunction):
    def process_element1(self, value, ctx):
        if value < 0:
            yield rejected, "negative %d" % value
        else:
            yield "number %d" % value

    def process_element2(self, value, ctx):
        if not value:
            yield rejected, "empty string"
        else:
            yield "word %s" % value


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
numbers = env.from_collection([3, -1, 7, -9], type_info=Types.INT())
words = env.from_collection(["x", "", "yz"], type_info=Types.STRING())
out = numbers.connect(words).process(Check(), Types.STRING())
out.print("main")
out.get_side_output(rejected).print("rejected")
env.execute("a03_side_co_process")
