"""Async I/O with retries: a fixed-delay strategy retries empty results and failures until a
request succeeds on its third attempt; attempt counts are reported."""

import asyncio

from pyflink.common import Time, Types
from pyflink.datastream import AsyncDataStream, AsyncFunction, StreamExecutionEnvironment
from pyflink.datastream.functions import AsyncRetryStrategy


class Flaky(AsyncFunction):
    def open(self, ctx):
        self.attempts = {}

    async def async_invoke(self, value):
        n = self.attempts.get(value, 0) + 1
        self.attempts[value] = n
        await asyncio.sleep(0.001)
        if value % 2 and n < 3:
            return []
        if value == 4 and n < 2:
            raise ValueError("transient")
        return ["%d after %d attempt(s)" % (value, n)]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
strategy = AsyncRetryStrategy.fixed_delay(
    5, 10, result_predicate=lambda results: len(results) == 0,
    exception_predicate=lambda e: isinstance(e, ValueError))
ds = env.from_collection([1, 2, 3, 4], type_info=Types.INT())
AsyncDataStream.ordered_wait_with_retry(ds, Flaky(), Time.seconds(10), strategy,
                                        output_type=Types.STRING()).print()
env.execute("a28_async_retry")
