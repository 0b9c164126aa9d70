"""Async I/O with a timeout: requests slower than the timeout get timeout()'s fallback."""

import asyncio

from pyflink.common import Time, Types
from pyflink.datastream import AsyncDataStream, AsyncFunction, StreamExecutionEnvironment


class MaybeSlow(AsyncFunction):
    async def async_invoke(self, value):
        if value % 2 == 0:
            await asyncio.sleep(5)
        return ["fast %d" % value]

    def timeout(self, value):
        return ["timed out %d" % value]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3, 4], type_info=Types.INT())
AsyncDataStream.ordered_wait(ds, MaybeSlow(), Time.milliseconds(500),
                             output_type=Types.STRING()).print()
env.execute("a27_async_timeout")
