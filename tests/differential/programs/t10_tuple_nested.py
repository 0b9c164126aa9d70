"""Types.TUPLE printing: Java's (a,b), nested tuples and rows, null fields, booleans, strings."""

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
inner = Types.TUPLE([Types.INT(), Types.STRING()])
outer = Types.TUPLE([Types.STRING(), inner, Types.BOOLEAN(),
                     Types.ROW([Types.INT(), Types.DOUBLE()])])
# A typed tuple field cannot be null (Java's TupleSerializer refuses it); a Row field can.
data = [("a", (1, "x"), True, Row(1, 2.0)), ("b, c", (2, "y"), False, Row(None, 0.5)),
        ("", (3, "ü"), True, Row(3, 1e-05))]
ds = env.from_collection(data, type_info=outer)
ds.print("typed")
ds.map(lambda t: "%s %s %r" % (type(t).__name__, type(t[1]).__name__, t[1]),
       Types.STRING()).print("seen")
ds.map(lambda t: t[1]).print("untyped")
env.execute("t10_tuple_nested")
