"""Per-operator set_parallelism and typed-key partitioning: a keyed reduce at parallelism 3
prints with the subtask prefix Flink's key groups give (STRING and INT keys)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(3)
words = ["apple", "kiwi", "fig", "plum", "pear", "lime", "date", "apple", "fig", "apple"]
ds = env.from_collection(words, type_info=Types.STRING())
(ds.map(lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
   .key_by(lambda t: t[0], key_type=Types.STRING())
   .reduce(lambda a, b: (a[0], a[1] + b[1]))
   .print("by-word"))
(env.from_collection(list(range(12)), type_info=Types.INT())
    .key_by(lambda v: v % 6, key_type=Types.INT())
    .map(lambda v: "%d mod 6" % v, Types.STRING())
    .print("by-int"))
env.execute("a20_operator_parallelism_typed_keys")
