"""Keyed sliding count windows (size 4, slide 2) with a WindowFunction (PyFlink's semantics)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment, WindowFunction


class Collect(WindowFunction):
    def apply(self, key, window, inputs):
        yield "%s id=%d %s" % (key, window.id, [v[1] for v in inputs])


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", i) for i in range(1, 10)] + [("b", 100), ("b", 101), ("b", 102)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .count_window(4, 2)
   .apply(Collect(), Types.STRING())
   .print())
env.execute("w10_count_sliding_apply")
