"""print() of typed floats uses Java's spelling (1.2345679E7, 1.0E-5); untyped ones Python's;
a typed Row is formatted in Python. One source, one branch per declared type."""

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
values = [12345678.9, 1e-05, 0.001, 1234567.0, 10000000.0, 100.0, -0.0, 0.1,
          float("inf"), float("-inf"), float("nan"), 5e-324, 1.7976931348623157e308]
ds = env.from_collection(values)
ds.print("pickled")
ds.map(lambda v: v, output_type=Types.DOUBLE()).print("double")
ds.map(lambda v: v, output_type=Types.FLOAT()).print("float")
(ds.filter(lambda v: abs(v) < 1e300 and v == v)
   .map(lambda v: (v, v), output_type=Types.TUPLE([Types.FLOAT(), Types.DOUBLE()]))
   .print("tuple"))
(ds.filter(lambda v: abs(v) < 1e300 and v == v)
   .map(lambda v: Row(v, v), output_type=Types.ROW([Types.FLOAT(), Types.DOUBLE()]))
   .print("row"))
env.execute("t04_float_print_format")
