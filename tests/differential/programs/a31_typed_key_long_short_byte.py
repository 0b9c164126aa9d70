"""Which subtask a LONG, SHORT or BYTE key goes to at parallelism 3: PyFlink hashes the key
as the declared Java type (Long.hashCode differs from Integer.hashCode for negative values)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(3)
longs = [-5, -1, -2, -7, -100, -2147483649, 2147483648, 1099511627776, -1099511627776,
         3000000000, -3000000000, 0, 1, 5, 9223372036854775807, -9223372036854775808]
(env.from_collection(longs, type_info=Types.LONG())
    .key_by(lambda v: v, key_type=Types.LONG())
    .map(lambda v: "long key %d" % v, Types.STRING())
    .print("long"))
shorts = [-32768, -300, -5, -1, 0, 1, 7, 300, 32767]
(env.from_collection(shorts, type_info=Types.SHORT())
    .key_by(lambda v: v, key_type=Types.SHORT())
    .map(lambda v: "short key %d" % v, Types.STRING())
    .print("short"))
bytes_ = [-128, -5, -1, 0, 1, 5, 127]
(env.from_collection(bytes_, type_info=Types.BYTE())
    .key_by(lambda v: v, key_type=Types.BYTE())
    .map(lambda v: "byte key %d" % v, Types.STRING())
    .print("byte"))
env.execute("a31_typed_key_long_short_byte")
