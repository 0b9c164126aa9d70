"""Several sinks on one job: print() with and without identifiers at different points, and
a keyed result printed twice."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(["b", "a", "b", "c", "b"], type_info=Types.STRING())
ds.print()
counted = (ds.map(lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
             .key_by(lambda t: t[0], key_type=Types.STRING())
             .reduce(lambda a, b: (a[0], a[1] + b[1])))
counted.print("counts")
counted.filter(lambda t: t[1] > 1).print("repeated")
ds.map(str.upper, Types.STRING()).print("upper")
env.execute("a23_graph_several_sinks")
