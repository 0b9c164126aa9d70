"""Keyed after keyed: per-word counts re-keyed by count, then a keyed process with state."""

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import ListStateDescriptor


class Members(KeyedProcessFunction):
    def open(self, ctx):
        self.words = ctx.get_list_state(ListStateDescriptor("words", Types.STRING()))

    def process_element(self, value, ctx):
        self.words.add(value[0])
        yield "count %d: %s" % (ctx.get_current_key(), sorted(self.words.get()))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
words = ["a", "b", "a", "c", "b", "a"]
(env.from_collection(words, type_info=Types.STRING())
    .map(lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
    .key_by(lambda t: t[0], key_type=Types.STRING())
    .reduce(lambda a, b: (a[0], a[1] + b[1]))
    .key_by(lambda t: t[1], key_type=Types.INT())
    .process(Members(), Types.STRING())
    .print())
env.execute("a24_graph_keyed_after_keyed")
