"""Side outputs from a ProcessFunction: `yield tag, value`, get_side_output, typed tags."""

from pyflink.common import Types
from pyflink.datastream import OutputTag, ProcessFunction, StreamExecutionEnvironment

odd = OutputTag("odd", Types.INT())
big = OutputTag("big", Types.STRING())


class Split(ProcessFunction):
    def process_element(self, value, ctx):
        if value % 2:
            yield odd, value
        if value > 6:
            yield big, "big %d" % value
        yield value * 100


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
main = env.from_collection(list(range(1, 10)), type_info=Types.INT()).process(Split(), Types.INT())
main.print("main")
main.get_side_output(odd).map(lambda v: v + 1000, Types.INT()).print("odd")
main.get_side_output(big).print("big")
env.execute("a01_side_process")
