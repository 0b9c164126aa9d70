"""print() of typed FLOAT and DOUBLE values whose Java 17 toString is not the shortest
decimal (Java 19 changed it): 2.5e10 as a FLOAT prints 2.49999995E10 on Java 17."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
values = [2.5e10, 1e23, 2.82879384806159e17, 1.1754943508222875e-38, 9.3860841e27,
          2e-323, 1e10, 12345678.0, 98765432.1, 4.35e-5, 1.0e-3, 3.0e9, 7.1e22]
ds = env.from_collection(values, type_info=Types.DOUBLE())
ds.print("double")
ds.map(lambda v: v, output_type=Types.FLOAT()).print("float")
(ds.map(lambda v: (v, v), output_type=Types.TUPLE([Types.FLOAT(), Types.DOUBLE()]))
   .print("tuple"))
env.execute("t14_float_print_java17")
