"""Integer types through Python functions: floor division, modulo, true division, big ints
kept pickled, and typed sums in keyed reduce."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (1, 3)]
ds = env.from_collection(pairs, type_info=Types.TUPLE([Types.INT(), Types.INT()]))
ds.map(lambda p: (p[0] // p[1], p[0] % p[1]),
       output_type=Types.TUPLE([Types.INT(), Types.INT()])).print("floordiv-mod")
ds.map(lambda p: p[0] / p[1], output_type=Types.DOUBLE()).print("truediv")
ds.map(lambda p: int(p[0] / p[1]), output_type=Types.LONG()).print("trunc")
ds.map(lambda p: p[0] * 2**70 * 3).print("bigint")
(ds.map(lambda p: ("a" if p[1] > 0 else "b", p[0] * (2**31 - 1)),
        output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
   .key_by(lambda t: t[0], key_type=Types.STRING())
   .reduce(lambda a, b: (a[0], a[1] + b[1]))
   .print("long-sum"))
env.execute("t06_integer_types_division")
