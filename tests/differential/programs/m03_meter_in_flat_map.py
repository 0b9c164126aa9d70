"""A meter (with and without a time span) marked from a FlatMapFunction; get_count."""

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
        for word in parts:
            yield "%s %d/%d" % (word, self.words.get_count(), self.lines.get_count())


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
lines = ["to be or not", "to be", "", "that is the question"]
env.from_collection(lines, Types.STRING()).flat_map(Words(), Types.STRING()).print()
env.execute("m03_meter_in_flat_map")
