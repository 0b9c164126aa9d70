"""A gauge (and one in a key/value group) registered in a KeyedProcessFunction's open()."""

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment


class Track(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.last = 0
        group = runtime_context.get_metrics_group()
        group.gauge("last", lambda: self.last)
        group.add_group("source", "letters").gauge("length", lambda: len(str(self.last)))

    def process_element(self, value, ctx):
        self.last = value[1]
        yield "%s:%d" % (ctx.get_current_key(), value[1])


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
rows = [("a", 1), ("b", 2), ("a", 30), ("c", 4), ("b", 500)]
(
    env.from_collection(rows, Types.TUPLE([Types.STRING(), Types.INT()]))
    .key_by(lambda r: r[0], key_type=Types.STRING())
    .process(Track(), Types.STRING())
    .print()
)
env.execute("m02_gauge_in_keyed_process")
