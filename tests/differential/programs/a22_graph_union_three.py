"""union of four streams (a union of a union) at parallelism 2, feeding a keyed branch and
a stateless branch."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
typ = Types.TUPLE([Types.STRING(), Types.INT()])
s1 = env.from_collection([("x", 1), ("y", 2)], type_info=typ)
s2 = env.from_collection([("x", 10)], type_info=typ)
s3 = env.from_collection([("z", 100), ("y", 200)], type_info=typ)
# (PyFlink cannot key a union whose inputs run at different parallelisms.)
s4 = env.from_collection([("x", 1000)], type_info=typ)
all_streams = s1.union(s2, s3).union(s4)
(all_streams.key_by(lambda t: t[0], key_type=Types.STRING())
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .print("keyed"))
all_streams.filter(lambda t: t[1] >= 10).map(lambda t: "%s:%d" % t, Types.STRING()).print("plain")
env.execute("a22_graph_union_three")
