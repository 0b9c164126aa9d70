"""A stream combined with a result derived from itself through another shuffle: each number
meets its key's running totals (connect), and the totals come back into a union with the
numbers themselves, keyed again and summed per key until the input ends."""

from pyflink.common import Types
from pyflink.datastream import CoMapFunction, KeyedProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.state import ValueStateDescriptor

END = 2**63 - 1


class Tag(CoMapFunction):
    def map1(self, value):
        return "number %d" % value

    def map2(self, value):
        return "total %d=%d" % value


class Summary(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count", Types.INT()))
        self.total = ctx.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        if self.count.value() is None:
            ctx.timer_service().register_event_time_timer(END)
        self.count.update((self.count.value() or 0) + 1)
        self.total.update((self.total.value() or 0) + value)

    def on_timer(self, timestamp, ctx):
        yield "key %d: %d values, sum %d" % (ctx.get_current_key(), self.count.value(),
                                             self.total.value())


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
numbers = env.from_collection(list(range(12)), type_info=Types.INT())
totals = (numbers
          .map(lambda x: (x % 3, x), output_type=Types.TUPLE([Types.INT(), Types.INT()]))
          .key_by(lambda t: t[0], key_type=Types.INT())
          .reduce(lambda a, b: (a[0], a[1] + b[1]))
          .set_parallelism(2))
numbers.connect(totals).map(Tag(), output_type=Types.STRING()).set_parallelism(2).print()
(numbers.union(totals.map(lambda t: t[1], output_type=Types.INT()))
    .key_by(lambda x: x % 2, key_type=Types.INT())
    .process(Summary(), Types.STRING())
    .set_parallelism(2)
    .print())
env.execute("a30_graph_stream_joined_with_its_own_result")
