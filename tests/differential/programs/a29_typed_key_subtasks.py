"""Which subtask a typed key goes to: key_by with key_type INT and STRING at parallelism 3,
the print prefix showing the keyed subtask (see NOTES.md: PyFlink keys a Row of the key)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(3)
ints = env.from_collection(list(range(10)), type_info=Types.INT())
(ints.key_by(lambda v: v, key_type=Types.INT())
     .map(lambda v: "int key %d" % v, Types.STRING())
     .print("int"))
(ints.key_by(lambda v: "k%d" % v, key_type=Types.STRING())
     .map(lambda v: "str key k%d" % v, Types.STRING())
     .print("str"))
env.execute("a29_typed_key_subtasks")
