"""A meter (with and without a time span) marked from a FlatMapFunction; get_count.

The counts are not printed: PyFlink's get_count() is the count within the current Beam
bundle (as for counters, see m01), so only what holds in any bundle is: a meter counts at
least what was just marked.
"""

from pyflink.common import Types
from pyflink.datastream import FlatMapFunction, RuntimeContext, StreamExecutionEnvironment


class Words(FlatMapFunction):
    def open(self, runtime_context: RuntimeContext):
        group = runtime_context.get_metrics_group().add_group("words")
        self.words = group.meter("words", time_span_in_seconds=30)
        self.lines = group.meter("lines")

    def flat_map(self, value):
        parts = value.split()
        self.words.mark_event(len(parts))
        self.lines.mark_event()
        marked = self.words.get_count() >= len(parts) and self.lines.get_count() >= 1
        for word in parts:
            yield "%s %d %s" % (word, len(parts), marked)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
lines = ["to be or not", "to be", "", "that is the question"]
env.from_collection(lines, Types.STRING()).flat_map(Words(), Types.STRING()).print()
env.execute("m03_meter_in_flat_map")
