"""shuffle(), rebalance() and rescale() into a map at parallelism 3: every record arrives
exactly once (which subtask gets which record is not defined: values only)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(list(range(12)), type_info=Types.INT())
for name, part in (("shuffle", ds.shuffle()), ("rebalance", ds.rebalance()),
                   ("rescale", ds.rescale())):
    (part.map(lambda v, n=name: "%s %d" % (n, v), Types.STRING()).set_parallelism(3)
         .print().set_parallelism(1))
env.execute("a16_partition_shuffle_rebalance_rescale")
