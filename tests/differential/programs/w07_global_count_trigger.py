"""Global windows with a CountTrigger: fires every 3 records per key, never purges."""

from pyflink.common import Types
from pyflink.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.window import CountTrigger, GlobalWindows


class Contents(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield "%s %s %s" % (key, type(context.window()).__name__, [e[1] for e in elements])


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", i) for i in range(7)] + [("b", 10), ("b", 11)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
(ds.key_by(lambda e: e[0], key_type=Types.STRING())
   .window(GlobalWindows.create())
   .trigger(CountTrigger.of(3))
   .process(Contents(), Types.STRING())
   .print())
env.execute("w07_global_count_trigger")
