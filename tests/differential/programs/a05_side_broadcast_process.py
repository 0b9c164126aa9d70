"""Side outputs from a BroadcastProcessFunction (both sides); the output does not depend on
which input arrives first."""

from pyflink.common import Types
from pyflink.datastream import BroadcastProcessFunction, OutputTag, StreamExecutionEnvironment
from pyflink.datastream.state import MapStateDescriptor

audit = OutputTag("audit", Types.STRING())
config = MapStateDescriptor("config", Types.STRING(), Types.STRING())


class Route(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value.upper()
        if "!" in value:
            yield audit, "element " + value

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(config).put(value[0], value[1])
        yield audit, "config %s=%s" % value


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
events = env.from_collection(["a", "b!", "c"], type_info=Types.STRING())
rules = env.from_collection([("mode", "loud"), ("level", "3")],
                            type_info=Types.TUPLE([Types.STRING(), Types.STRING()]))
out = events.connect(rules.broadcast(config)).process(Route(), Types.STRING())
out.print("main")
out.get_side_output(audit).print("audit")
env.execute("a05_side_broadcast_process")
