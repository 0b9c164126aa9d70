"""window_all with a sliding count assigner (size 3, slide 2) and an AllWindowFunction."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AllWindowFunction
from pyflink.datastream.window import CountSlidingWindowAssigner


class Join(AllWindowFunction):
    def apply(self, window, inputs):
        yield "-".join(inputs)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(list("abcdefgh"), type_info=Types.STRING())
(ds.window_all(CountSlidingWindowAssigner.of(3, 2))
   .apply(Join(), Types.STRING())
   .print())
env.execute("w14_window_all_count_sliding_apply")
