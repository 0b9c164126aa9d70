"""Typed integers out of range fail the job (PyFlink raises OverflowError); in-range limits
print as Java prints them. Each overflow is its own job; the program prints what it caught."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
limits = [("BYTE", Types.BYTE(), -128, 127), ("SHORT", Types.SHORT(), -32768, 32767),
          ("INT", Types.INT(), -2**31, 2**31 - 1), ("LONG", Types.LONG(), -2**63, 2**63 - 1)]
source = env.from_collection([(name, v) for name, _, lo, hi in limits for v in (lo, hi)])
for name, typ, _lo, _hi in limits:
    (source.filter(lambda p, n=name: p[0] == n)
           .map(lambda p: p[1], output_type=typ)
           .print(name))
env.execute("t05_integer_overflow limits")

for name, typ, _lo, hi in limits:
    env.from_collection([hi]).map(lambda v: v + 1, output_type=typ).print(name)
    try:
        env.execute("t05_integer_overflow " + name)
        print(name, "no error")
    except Exception as e:
        print(name, "failed with OverflowError:", "OverflowError" in str(e))
