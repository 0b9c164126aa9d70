"""Which subtask a BOOLEAN, DOUBLE, FLOAT or STRING key goes to at parallelism 3: PyFlink
hashes the key as the declared Java type (Double.hashCode, Float.hashCode, ...)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(3)
(env.from_collection([True, False], type_info=Types.BOOLEAN())
    .key_by(lambda v: v, key_type=Types.BOOLEAN())
    .map(lambda v: "boolean key %s" % v, Types.STRING())
    .print("boolean"))
doubles = [-5.0, -1.5, -0.25, 0.0, 0.1, 1.0, 2.5, 3.0, 1e10, -1e-10, 123456.789, 2.5e10]
(env.from_collection(doubles, type_info=Types.DOUBLE())
    .key_by(lambda v: v, key_type=Types.DOUBLE())
    .map(lambda v: "double key %r" % v, Types.STRING())
    .print("double"))
floats = [-5.0, -1.5, -0.25, 0.0, 0.5, 1.0, 2.5, 3.0, 1024.0, -7.75]
(env.from_collection(floats, type_info=Types.FLOAT())
    .key_by(lambda v: v, key_type=Types.FLOAT())
    .map(lambda v: "float key %r" % v, Types.STRING())
    .print("float"))
strings = ["", "a", "Aa", "BB", "hello", "negative hash zzzzzzzzzz", "\u00e9t\u00e9", "-5"]
(env.from_collection(strings, type_info=Types.STRING())
    .key_by(lambda v: v, key_type=Types.STRING())
    .map(lambda v: "string key %r" % v, Types.STRING())
    .print("string"))
env.execute("a32_typed_key_boolean_double_float_string")
