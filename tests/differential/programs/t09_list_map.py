"""Types.LIST and Types.MAP round-trip; print() shows Java's List and Map toString
(HashMap order)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
# from_collection cannot hand Java a list for Types.LIST: maps produce the typed values.
source = env.from_collection([2, 0, 3], type_info=Types.INT())
lists = source.map(lambda n: list(range(1, n + 1)), output_type=Types.LIST(Types.LONG()))
lists.print("list")
lists.map(lambda v: "%s %r" % (type(v).__name__, v), Types.STRING()).print("list-seen")
keys = ["x", "b", "aa", "zz", "B", "key10", "key2"]
maps = source.map(lambda n: {k: i for i, k in enumerate(keys[: n * 2])},
                  output_type=Types.MAP(Types.STRING(), Types.INT()))
(maps.map(lambda m: "%s %r" % (type(m).__name__, sorted(m.items())), Types.STRING())
     .print("map-seen"))
maps.map(lambda m: {k: v for k, v in m.items() if k != "b"},
         output_type=Types.MAP(Types.STRING(), Types.INT())).print("map")
source.map(lambda n: {"k%d" % n: [1.5 * n, 2.0]},
           output_type=Types.MAP(Types.STRING(), Types.LIST(Types.DOUBLE()))).print("nested")
env.execute("t09_list_map")
