"""Values kept in state declared with typed descriptors: FLOAT rounds, ROW_NAMED comes back
as Row, LIST/MAP/TUPLE round-trip, reducing and aggregating state with typed values."""

from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction
from pyflink.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)


class Mean(AggregateFunction):
    def create_accumulator(self):
        return 0.0, 0

    def add(self, value, acc):
        return acc[0] + value, acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class Keep(KeyedProcessFunction):
    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total", Types.FLOAT()))
        self.last = ctx.get_state(ValueStateDescriptor(
            "last", Types.ROW_NAMED(["v", "tag"], [Types.DOUBLE(), Types.STRING()])))
        self.pair = ctx.get_state(ValueStateDescriptor(
            "pair", Types.TUPLE([Types.INT(), Types.LIST(Types.STRING())])))
        self.history = ctx.get_list_state(ListStateDescriptor("history", Types.DOUBLE()))
        self.by_tag = ctx.get_map_state(MapStateDescriptor("by_tag", Types.STRING(), Types.INT()))
        self.product = ctx.get_reducing_state(
            ReducingStateDescriptor("product", lambda a, b: a * b, Types.LONG()))
        self.mean = ctx.get_aggregating_state(
            AggregatingStateDescriptor("mean", Mean(), Types.TUPLE([Types.DOUBLE(), Types.INT()])))

    def process_element(self, value, ctx):
        key, v, tag = value
        self.total.update((self.total.value() or 0) + v)
        previous = self.last.value()
        self.last.update(Row(v=v, tag=tag))
        pair = self.pair.value() or (0, [])
        self.pair.update((pair[0] + 1, pair[1] + [tag]))
        self.history.add(v)
        self.by_tag.put(tag, (self.by_tag.get(tag) or 0) + 1)
        self.product.add(int(v) or 1)
        self.mean.add(v)
        yield "%s total=%r prev=%s/%s pair=%r history=%r tags=%r product=%d mean=%r" % (
            key, self.total.value(), type(previous).__name__,
            previous.tag if previous is not None else "-", self.pair.value(),
            list(self.history.get()), sorted(self.by_tag.items()), self.product.get(),
            self.mean.get())


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("k", 0.1, "x"), ("k", 110.1, "y"), ("j", 2.5, "x"), ("k", 3.0, "x")]
(env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.DOUBLE(), Types.STRING()]))
    .key_by(lambda t: t[0], key_type=Types.STRING())
    .process(Keep(), Types.STRING())
    .print())
env.execute("t11_typed_state")
