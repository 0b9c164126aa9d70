"""AsyncDataStream.unordered_wait with several results per request (order not defined)."""

import asyncio

from pyflink.common import Time, Types
from pyflink.datastream import AsyncDataStream, AsyncFunction, StreamExecutionEnvironment


class Expand(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(0.01 * (value % 3))
        return [(value, i) for i in range(value % 3 + 1)]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3, 4, 5], type_info=Types.INT())
AsyncDataStream.unordered_wait(ds, Expand(), Time.seconds(10), capacity=2,
                               output_type=Types.TUPLE([Types.INT(), Types.INT()])).print()
env.execute("a26_async_unordered")
