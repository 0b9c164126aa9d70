"""Side outputs of several types from one function: ROW_NAMED (field access downstream),
TUPLE, DOUBLE and an untyped (pickled) tag."""

from pyflink.common import Row, Types
from pyflink.datastream import OutputTag, ProcessFunction, StreamExecutionEnvironment

as_row = OutputTag("row", Types.ROW_NAMED(["word", "length"], [Types.STRING(), Types.INT()]))
as_tuple = OutputTag("tuple", Types.TUPLE([Types.STRING(), Types.FLOAT()]))
as_double = OutputTag("double", Types.DOUBLE())
untyped = OutputTag("untyped")


class Fan(ProcessFunction):
    def process_element(self, value, ctx):
        yield as_row, Row(word=value, length=len(value))
        yield as_tuple, (value, len(value) / 3)
        yield as_double, len(value) * 1e7 + 0.5
        yield untyped, {value: len(value)}


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
out = env.from_collection(["ab", "cde"], type_info=Types.STRING()).process(Fan(), Types.STRING())
out.get_side_output(as_row).print("row")
(out.get_side_output(as_row).map(lambda r: "%s:%d" % (r.word, r.length), Types.STRING())
    .print("named"))
out.get_side_output(as_tuple).print("tuple")
out.get_side_output(as_double).print("double")
out.get_side_output(untyped).print("untyped")
env.execute("a08_side_typed_outputs")
