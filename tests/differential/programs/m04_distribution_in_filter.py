"""A distribution updated from a FilterFunction, and from a reduce on a keyed stream."""

from pyflink.common import Types
from pyflink.datastream import (
    FilterFunction,
    ReduceFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)


class KeepSmall(FilterFunction):
    def open(self, runtime_context: RuntimeContext):
        self.sizes = runtime_context.get_metrics_group().distribution("sizes")

    def filter(self, value):
        self.sizes.update(value[1])
        return value[1] < 50


class Add(ReduceFunction):
    def open(self, runtime_context: RuntimeContext):
        self.sums = runtime_context.get_metrics_group().add_group("reduce").distribution("sums")

    def reduce(self, a, b):
        total = a[1] + b[1]
        self.sums.update(total)
        return a[0], total


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
rows = [("x", 5), ("y", 70), ("x", 12), ("y", 8), ("x", 49), ("z", 50)]
(
    env.from_collection(rows, Types.TUPLE([Types.STRING(), Types.INT()]))
    .filter(KeepSmall())
    .key_by(lambda r: r[0], key_type=Types.STRING())
    .reduce(Add())
    .print()
)
env.execute("m04_distribution_in_filter")
