"""print() of typed floats uses Java's spelling (1.2345679E7, 1.0E-5); untyped ones Python's."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
values = [12345678.9, 1e-05, 0.001, 1234567.0, 10000000.0, 100.0, -0.0, 0.1,
          float("inf"), float("-inf"), float("nan"), 5e-324, 1.7976931348623157e308]
env.from_collection(values, type_info=Types.DOUBLE()).print("double")
env.from_collection(values, type_info=Types.FLOAT()).print("float")
env.from_collection(values).print("pickled")
(env.from_collection([(v, v) for v in values[:6]],
                     type_info=Types.TUPLE([Types.FLOAT(), Types.DOUBLE()]))
    .print("tuple"))
(env.from_collection([(v, v) for v in values[:6]],
                     type_info=Types.ROW([Types.FLOAT(), Types.DOUBLE()]))
    .print("row"))
env.execute("t04_float_print_format")
