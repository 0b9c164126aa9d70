"""Fan-out: one stream feeds a keyed reduce and a non-keyed map; both keyed branches of a
second fan-out, each with its own sink."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
typ = Types.TUPLE([Types.STRING(), Types.INT()])
ds = env.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)], type_info=typ)
ds.key_by(lambda t: t[0], key_type=Types.STRING()).reduce(
    lambda x, y: (x[0], x[1] + y[1])).print("sum")
ds.map(lambda t: t[0] * t[1], Types.STRING()).print("map")
doubled = ds.map(lambda t: (t[0], t[1] * 2), output_type=typ)
doubled.key_by(lambda t: t[0], key_type=Types.STRING()).reduce(
    lambda x, y: (x[0], max(x[1], y[1]))).print("max")
doubled.key_by(lambda t: t[1] % 2, key_type=Types.INT()).reduce(
    lambda x, y: (x[0] + y[0], x[1] + y[1])).print("parity")
env.execute("a21_graph_fan_out")
