"""AsyncDataStream.ordered_wait: results leave in input order although later requests finish
first."""

import asyncio

from pyflink.common import Time, Types
from pyflink.datastream import AsyncDataStream, AsyncFunction, StreamExecutionEnvironment


class SlowLookup(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep((5 - value) * 0.02)
        return ["%d -> %d" % (value, value * value)]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3, 4], type_info=Types.INT())
AsyncDataStream.ordered_wait(ds, SlowLookup(), Time.seconds(10), capacity=10,
                             output_type=Types.STRING()).print()
env.execute("a25_async_ordered")
