"""Counters from a MapFunction's open(): plain and in a sub-group, inc and dec, get_count.

The counts are not printed: PyFlink's get_count() is the count within the current Beam
bundle (it printed 1 for both of the first two records), which no program can rely on.
"""

from pyflink.datastream import MapFunction, RuntimeContext, StreamExecutionEnvironment


class CountingMap(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        group = runtime_context.get_metrics_group()
        self.seen = group.counter("seen")
        self.evens = group.add_group("parity").counter("evens")
        self.other = group.counter("other")

    def map(self, value):
        self.seen.inc()
        if value % 2 == 0:
            self.evens.inc(3)
            self.evens.dec(2)
        self.other.inc(10)
        positive = self.seen.get_count() > 0 and self.other.get_count() >= 10
        return value, value % 2 == 0, positive


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_collection(list(range(12))).map(CountingMap()).print()
env.execute("m01_counter_in_map")
