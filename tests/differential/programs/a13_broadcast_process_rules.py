"""BroadcastProcessFunction: every rule reaches every parallel instance (parallelism 2);
each instance reports its broadcast state at the end, read through a keyed timer."""

from pyflink.common import Types
from pyflink.datastream import BroadcastProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import MapStateDescriptor

rules = MapStateDescriptor("rules", Types.STRING(), Types.INT())


class Collect(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield "element %s" % value

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(rules).put(value[0], value[1])
        yield "rule %s=%d on subtask %d" % (value[0], value[1],
                                            self.get_runtime_context().get_index_of_this_subtask())

    def open(self, ctx):
        self._ctx = ctx

    def get_runtime_context(self):
        return self._ctx


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
events = env.from_collection(["e1", "e2", "e3", "e4"], type_info=Types.STRING())
updates = env.from_collection([("max", 10), ("min", 1)],
                              type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
(events.connect(updates.broadcast(rules))
       .process(Collect(), Types.STRING())
       .print())
env.execute("a13_broadcast_process_rules")
