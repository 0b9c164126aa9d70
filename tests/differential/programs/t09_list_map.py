"""Types.LIST and Types.MAP round-trip; print() shows Java's List and Map toString."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
# from_collection cannot hand Java a list for Types.LIST: a map produces them.
lists = env.from_collection([2, 0, 1]).map(lambda n: list(range(1, n + 1)),
                                           output_type=Types.LIST(Types.LONG()))
lists.print("list")
lists.map(lambda v: "%s %r" % (type(v).__name__, v), Types.STRING()).print("list-seen")
maps = env.from_collection([{"a": 1}, {}, {"x": 3, "b": 2, "aa": 10}],
                           type_info=Types.MAP(Types.STRING(), Types.INT()))
(maps.map(lambda m: "%s %r" % (type(m).__name__, sorted(m.items())), Types.STRING())
     .print("map-seen"))
maps.map(lambda m: {k: v for k, v in m.items() if k != "b"},
         output_type=Types.MAP(Types.STRING(), Types.INT())).print("map")
nested = env.from_collection(["k"]).map(
    lambda k: {k: [1.5, 2.0]}, output_type=Types.MAP(Types.STRING(), Types.LIST(Types.DOUBLE())))
nested.print("nested")
env.execute("t09_list_map")
