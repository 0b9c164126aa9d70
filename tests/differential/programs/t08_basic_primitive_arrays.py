"""BASIC_ARRAY and PRIMITIVE_ARRAY types round-trip as Python lists (Java prints arrays by
identity, so the program prints them from Python)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([[1, 2, 3], [], [-5]], type_info=Types.BASIC_ARRAY(Types.INT()))
ds.map(lambda a: "basic %s %r" % (type(a).__name__, a), Types.STRING()).print("basic")
ds2 = ds.map(lambda a: [x * 1.5 for x in a], output_type=Types.PRIMITIVE_ARRAY(Types.DOUBLE()))
ds2.map(lambda a: "primitive %s %r" % (type(a).__name__, a), Types.STRING()).print("primitive")
strings = ds.map(lambda a: [str(x) if x > 0 else None for x in a],
                 output_type=Types.BASIC_ARRAY(Types.STRING()))
strings.map(lambda a: "strings %r" % (a,), Types.STRING()).print("strings")
raw = ds.map(lambda a: bytes(x % 256 for x in a),
             output_type=Types.PRIMITIVE_ARRAY(Types.BYTE()))
raw.map(lambda b: "bytes %s %r" % (type(b).__name__, b), Types.STRING()).print("bytes")
env.execute("t08_basic_primitive_arrays")
