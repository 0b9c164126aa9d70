"""Types.FLOAT rounds to a Java float between operators; Types.DOUBLE keeps full precision."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
values = [0.1, 110.1, 1 / 3, 16777217.0, 3.4e38, 1e-46, -2.5]
ds = env.from_collection(values, type_info=Types.FLOAT())
ds.map(lambda v: "float %r" % v, Types.STRING()).print()
doubles = env.from_collection(values, type_info=Types.DOUBLE())
doubles.map(lambda v: "double %r" % v, Types.STRING()).print()
(doubles.map(lambda v: v * 3, output_type=Types.FLOAT())
        .map(lambda v: v + 0.1, output_type=Types.FLOAT())
        .map(lambda v: "chain %r" % v, Types.STRING())
        .print())
env.execute("t03_float_rounding")
