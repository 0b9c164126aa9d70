"""connect() with a CoFlatMapFunction emitting zero or more records per input."""

from pyflink.common import Types
from pyflink.datastream import CoFlatMapFunction, StreamExecutionEnvironment


class Explode(CoFlatMapFunction):
    def flat_map1(self, value):
        yield from value.split()

    def flat_map2(self, value):
        for _ in range(value):
            yield "#%d" % value


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
lines = env.from_collection(["to be", "", "or not"], type_info=Types.STRING())
counts = env.from_collection([2, 0, 1], type_info=Types.INT())
lines.connect(counts).flat_map(Explode(), Types.STRING()).print()
env.execute("a10_connect_co_flat_map")
